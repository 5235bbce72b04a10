/* One check, two callers: an Open MPI rank that has gdx but whose mpirun line does not route MPI through UCX is
 * told so, in one line, by rank 0.
 *
 * Why: Open MPI picks ob1 without a word when pml ucx is not asked for (Debian's and Ubuntu's
 * openmpi-mca-params.conf even disable it), and pml ucx refuses to run ("PML ucx cannot be selected") unless
 * pml_ucx_tls / pml_ucx_devices admit the transports in UCX_TLS. A user who sets LD_PRELOAD, UCX_PLUGIN_PATH or
 * UCX_TLS by hand instead of using gdx-run gets silently slow MPI, or a failure that does not name the fix.
 * mpirun hands its --mca settings to the ranks as OMPI_MCA_* variables, so the rank can say what is missing.
 *
 * The callers: libuct_gdx_loader.so, which a process preloads on purpose to get gdx (UCX < 1.22), and libuct_gdx
 * itself wherever it is loaded (UCX >= 1.22 loads it from <libdir>/ucx/ or UCX_PLUGIN_PATH; below, the loader
 * does). The module speaks only when UCX_TLS names a gdx transport: installed in <libdir>/ucx/ it is loaded into
 * every UCX process, and ranks that never asked for gdx must not be lectured. A rank in which nothing of UCX is
 * ever loaded (pml ucx disabled and not asked for) runs none of this: src/uct/README.md, "Open MPI by
 * hand", says so. The loader exports uct_gdx_ompi_told so that the module, loaded later into the same process,
 * does not repeat the line. */
#ifndef UCT_GDX_OMPI_H
#define UCT_GDX_OMPI_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int uct_gdx_ompi_lists(const char *name, const char *what)
{
    const char *v = getenv(name);

    return (v != NULL) && ((strstr(v, what) != NULL) || (strcmp(v, "any") == 0));
}

/* who: the library printing ("libuct_gdx_loader", "libuct_gdx"). Returns 1 when it printed. */
static inline int uct_gdx_ompi_check(const char *who)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *pml  = getenv("OMPI_MCA_pml");
    const char *missing;

    if ((rank == NULL) || (strcmp(rank, "0") != 0)) {
        return 0;
    }
    if ((pml == NULL) || (strcmp(pml, "ucx") != 0)) {
        missing = "--mca pml ucx";
    } else if (!uct_gdx_ompi_lists("OMPI_MCA_pml_ucx_tls", "gdx_")) {
        missing = "--mca pml_ucx_tls <gdx transports>,self";
    } else if (!uct_gdx_ompi_lists("OMPI_MCA_pml_ucx_devices", "any")) {
        missing = "--mca pml_ucx_devices any";
    } else {
        return 0;
    }
    fprintf(stderr, "%s: this Open MPI rank loads gdx, but its mpirun line lacks %s: Open MPI will not carry MPI "
            "traffic over UCX/gdx (it falls back to ob1 or finds no pml). Use tools/gdx-run mpirun ..., or add "
            "--mca pml ucx --mca pml_ucx_tls <gdx transports>,self --mca pml_ucx_devices any --mca osc ucx "
            "(src/uct/README.md, \"Open MPI by hand\")\n", who, missing);
    return 1;
}

#endif
