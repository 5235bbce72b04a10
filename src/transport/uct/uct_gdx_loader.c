/* libuct_gdx_loader.so: what a process preloads (or links) to get gdx's transports into a UCX older than 1.22,
 * which loads only the modules named at its configure time (README.md, "Loading").
 *
 * Why a loader instead of preloading libuct_gdx.so.0 itself: the module fills in UCX's internal structs, so each
 * build fits exactly one UCX build (version *and* configuration: ENABLE_STATS, ENABLE_DEBUG_DATA, ENABLE_ASSERT
 * change layouts). Preloaded into another UCX it cannot even be linked (UCX 1.16 lacks symbols 1.13 had: the
 * dynamic linker kills every process, `true` included, with "undefined symbol"). The loader links nothing of
 * UCX and reads nothing of its internals: it asks libucp for its version (ucp_get_version, public), identifies
 * the running libucs.so.0 by its GNU build-id (an ELF note of the mapped file, which changes with any rebuild,
 * so with any configuration change), then dlopen()s the libuct_gdx build whose manifest names that version and
 * build-id. dlopen() reports a failure instead of killing the process. Any mismatch is one line on stderr and
 * the process goes on with UCX's own transports.
 *
 * Where builds are looked for: the colon-separated LIBUCT_GDX_PATH (directories holding libuct_gdx.so.0 and its
 * manifest libuct_gdx.ucx, e.g. a build tree's src/transport/uct), then <loader's directory>/gdx/ucx/<any>/
 * (what `cmake --install` lays out). The variable is not GDX_* or UCX_*: both libraries warn about unknown
 * variables of their prefix. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOADER "libuct_gdx_loader"
#define MANIFEST "libuct_gdx.ucx"
#define MODULE "libuct_gdx.so.0"

typedef struct {
    char version[32];    /* "1.16.0" */
    char build_id[129];  /* hex, "" when the file has none */
    char path[4096];     /* of libucs.so.0 */
} loader_ucx_t;

/* Copies a string, cut to the destination (manifest values and paths longer than that are not ours). */
static void loader_copy(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- the running UCX ---------------------------------------------------------------------------------- */

static int loader_note_build_id(const ElfW(Phdr) *ph, ElfW(Addr) base, char *out, size_t out_size)
{
    const char *p   = (const char*)(base + ph->p_vaddr);
    const char *end = p + ph->p_memsz;

    while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr)*)p;
        const unsigned char *name = (const unsigned char*)(nh + 1);
        const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
        if ((nh->n_type == NT_GNU_BUILD_ID) && (nh->n_namesz == 4) && (memcmp(name, "GNU", 4) == 0)) {
            size_t i;
            for (i = 0; (i < nh->n_descsz) && ((2 * i + 2) < out_size); ++i) {
                snprintf(out + 2 * i, 3, "%02x", desc[i]);
            }
            return 1;
        }
        p = (const char*)desc + ((nh->n_descsz + 3) & ~3u);
    }
    return 0;
}

static int loader_find_libucs(struct dl_phdr_info *info, size_t size, void *arg)
{
    loader_ucx_t *ucx = arg;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base  = (slash != NULL) ? slash + 1 : info->dlpi_name;
    int i;

    (void)size;
    if (strncmp(base, "libucs.so", 9) != 0) {
        return 0;
    }
    snprintf(ucx->path, sizeof(ucx->path), "%s", info->dlpi_name);
    for (i = 0; i < info->dlpi_phnum; ++i) {
        if ((info->dlpi_phdr[i].p_type == PT_NOTE) &&
            loader_note_build_id(&info->dlpi_phdr[i], info->dlpi_addr, ucx->build_id, sizeof(ucx->build_id))) {
            break;
        }
    }
    return 1;
}

/* 0 and a message in `why` when no UCX can be found or asked. */
static int loader_running_ucx(loader_ucx_t *ucx, char *why, size_t why_size)
{
    void (*get_version)(unsigned*, unsigned*, unsigned*);
    unsigned major = 0, minor = 0, release = 0;
    void *ucp;

    memset(ucx, 0, sizeof(*ucx));
    /* An application that uses UCP has it loaded; one that opens UCX later (Open MPI's pml ucx) gets it loaded
     * here, global and for good, as preloading the module always did. */
    ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (ucp == NULL) {
        ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_GLOBAL);
    }
    if (ucp == NULL) {
        snprintf(why, why_size, "no UCX here: dlopen(libucp.so.0) failed: %s", dlerror());
        return 0;
    }
    *(void**)&get_version = dlsym(ucp, "ucp_get_version");
    if (get_version == NULL) {
        snprintf(why, why_size, "libucp.so.0 has no ucp_get_version");
        return 0;
    }
    get_version(&major, &minor, &release);
    snprintf(ucx->version, sizeof(ucx->version), "%u.%u.%u", major, minor, release);
    dl_iterate_phdr(loader_find_libucs, ucx);
    return 1;
}

/* ---- the builds on offer -------------------------------------------------------------------------------- */

/* Reads "key=value" lines of a manifest into version/build_id/config; 0 when unreadable. */
static int loader_read_manifest(const char *dir, char *version, size_t vsize, char *build_id, size_t bsize,
                                char *config, size_t csize)
{
    char path[4200], line[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/" MANIFEST, dir);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    version[0] = build_id[0] = config[0] = '\0';
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "version=", 8) == 0) {
            loader_copy(version, vsize, line + 8);
        } else if (strncmp(line, "libucs_build_id=", 16) == 0) {
            loader_copy(build_id, bsize, line + 16);
        } else if (strncmp(line, "config=", 7) == 0) {
            loader_copy(config, csize, line + 7);
        }
    }
    fclose(f);
    return version[0] != '\0';
}

typedef struct {
    const loader_ucx_t *ucx;
    char               match[4200];  /* directory of the matching build */
    char               seen[2048];   /* what was on offer, for the refusal line */
} loader_search_t;

static void loader_consider(loader_search_t *s, const char *dir)
{
    char version[32], build_id[129], config[128], item[512];

    if ((s->match[0] != '\0') ||
        !loader_read_manifest(dir, version, sizeof(version), build_id, sizeof(build_id), config, sizeof(config))) {
        return;
    }
    /* Same version and the very same libucs build (a build-id on both sides, equal). A UCX without build-ids
     * cannot be told from a rebuild with another configuration: refused too, with that reason. */
    if ((strcmp(version, s->ucx->version) == 0) && (build_id[0] != '\0') &&
        (strcmp(build_id, s->ucx->build_id) == 0)) {
        snprintf(s->match, sizeof(s->match), "%s", dir);
        return;
    }
    snprintf(item, sizeof(item), "%s%s [%s, libucs build-id %.12s] in %s", (s->seen[0] != '\0') ? "; " : "",
             version, config, (build_id[0] != '\0') ? build_id : "none", dir);
    strncat(s->seen, item, sizeof(s->seen) - strlen(s->seen) - 1);
}

static void loader_scan_tree(loader_search_t *s, const char *dir)
{
    char sub[4600];
    struct dirent *e;
    DIR *d = opendir(dir);

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            snprintf(sub, sizeof(sub), "%.4200s/%.255s", dir, e->d_name);
            loader_consider(s, sub);
        }
    }
    closedir(d);
}

/* ---- Open MPI set by hand -------------------------------------------------------------------------------- */

/* An Open MPI rank that preloads gdx but whose mpirun line does not select pml ucx runs on ob1 (Debian's
 * openmpi-mca-params.conf disables pml ucx) or fails to open any pml (pml ucx accepts only the transports and
 * devices named in pml_ucx_tls / pml_ucx_devices): silently slow, or a cryptic failure. mpirun hands its --mca
 * settings to the ranks as OMPI_MCA_* variables, so the rank can say what is missing. Rank 0 only, one line. */
static int loader_mca_lists(const char *name, const char *what)
{
    const char *v = getenv(name);

    return (v != NULL) && ((strstr(v, what) != NULL) || (strcmp(v, "any") == 0));
}

static void loader_check_open_mpi(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *pml  = getenv("OMPI_MCA_pml");
    const char *missing;

    if ((rank == NULL) || (strcmp(rank, "0") != 0)) {
        return;
    }
    if ((pml == NULL) || (strcmp(pml, "ucx") != 0)) {
        missing = "--mca pml ucx";
    } else if (!loader_mca_lists("OMPI_MCA_pml_ucx_tls", "gdx_")) {
        missing = "--mca pml_ucx_tls <gdx transports>,self";
    } else if (!loader_mca_lists("OMPI_MCA_pml_ucx_devices", "any")) {
        missing = "--mca pml_ucx_devices any";
    } else {
        return;
    }
    fprintf(stderr, LOADER ": this Open MPI rank loads gdx, but its mpirun line lacks %s: Open MPI will not carry "
            "MPI traffic over UCX/gdx (it falls back to ob1 or finds no pml). Use tools/gdx-run mpirun ..., or add "
            "--mca pml ucx --mca pml_ucx_tls <gdx transports>,self --mca pml_ucx_devices any --mca osc ucx "
            "(src/transport/uct/README.md, \"Loading\")\n", missing);
}

__attribute__((constructor)) static void uct_gdx_loader_init(void)
{
    static loader_ucx_t ucx;
    static loader_search_t s;
    char why[512], module[4300], *list, *dir, *save;
    const char *env = getenv("LIBUCT_GDX_PATH");
    Dl_info self;
    void *dl;

    loader_check_open_mpi();
    if (!loader_running_ucx(&ucx, why, sizeof(why))) {
        fprintf(stderr, LOADER ": %s; gdx transports not loaded\n", why);
        return;
    }
    if ((strncmp(ucx.version, "1.", 2) != 0) || (atoi(ucx.version + 2) >= 22)) {
        /* UCX 1.22 loads libuct_gdx.so.0 itself (<libdir>/ucx/ or UCX_PLUGIN_PATH); loading it here as well
         * would register every gdx component twice. */
        return;
    }
    s.ucx = &ucx;
    if ((env != NULL) && ((list = strdup(env)) != NULL)) {
        for (dir = strtok_r(list, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
            loader_consider(&s, dir);
        }
        free(list);
    }
    if ((s.match[0] == '\0') && dladdr((void*)uct_gdx_loader_init, &self) && (self.dli_fname != NULL)) {
        char installed[4200];
        const char *slash = strrchr(self.dli_fname, '/');
        snprintf(installed, sizeof(installed), "%.*s/gdx/ucx", (slash != NULL) ? (int)(slash - self.dli_fname) : 1,
                 (slash != NULL) ? self.dli_fname : ".");
        loader_scan_tree(&s, installed);
    }
    if (s.match[0] == '\0') {
        fprintf(stderr, LOADER ": no libuct_gdx build for the running UCX %s (%s, build-id %.12s); on offer: %s; "
                "gdx transports not loaded, UCX's own transports unaffected (build gdx against this UCX: "
                "src/transport/uct/README.md)\n", ucx.version, ucx.path[0] ? ucx.path : "libucs.so.0",
                ucx.build_id[0] ? ucx.build_id : "none", s.seen[0] ? s.seen : "none (set LIBUCT_GDX_PATH)");
        return;
    }
    snprintf(module, sizeof(module), "%s/" MODULE, s.match);
    dl = dlopen(module, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == NULL) {
        fprintf(stderr, LOADER ": %s matches UCX %s but does not load: %s; gdx transports not loaded\n", module,
                ucx.version, dlerror());
    }
}
