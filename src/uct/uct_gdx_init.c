/* Load-time entry of libuct_gdx: check that the running UCX is the one whose internal headers and config.h the
 * module was compiled against, then register the gdx components.
 *
 * Why a guard: the soname stays libuct.so.0 / libucp.so.0 across UCX releases and configurations, so nothing at
 * link or load time notices that uct_component_t, uct_iface_ops_t or uct_base_iface_t changed layout (a release)
 * or that ucs_async_context_t's mutex or uct_base_iface_t's statistics node did (ENABLE_ASSERT, ENABLE_STATS).
 * Registering anyway would corrupt memory. The version comes from ucp_get_version(), the configuration from the
 * loaded libraries (uct_gdx_ucxbuild.h): the same reading the loader makes, here for UCX >= 1.22, which loads
 * this module itself, and for anyone who preloads it by hand.
 *
 * Why a separate file: it is linked after libgdx_internal.a, so its constructor runs after the C++ static
 * initializers of gdx's transports (the ELF .init_array follows link order), which the registration calls. */
#define _GNU_SOURCE
#include "uct_gdx_ompi.h"
#include "uct_gdx_ucxbuild.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#if !defined(GDX_UCT_BUILT_VERSION) || !defined(GDX_UCT_BUILT_ASSERT) || !defined(GDX_UCT_BUILT_STATS) || \
    !defined(GDX_UCT_BUILT_DEBUG_DATA)
#error "GDX_UCT_BUILT_VERSION/_ASSERT/_STATS/_DEBUG_DATA (the UCX built against) must be defined by the build"
#endif

void uct_gdx_register_all(void);

/* Returns 1 when the running UCX matches what the module was built for. Messages go to stderr with fprintf: on
 * a mismatch even UCS's logger (ucs_global_opts' layout) cannot be trusted. */
static int uct_gdx_build_ok(void)
{
    static const int built[UCT_GDX_UCX_LAYOUT_KEYS] = {GDX_UCT_BUILT_ASSERT, GDX_UCT_BUILT_STATS,
                                                       GDX_UCT_BUILT_DEBUG_DATA};
    uct_gdx_ucx_build_t run;
    char why[512], have[96], want[96] = "";
    int loaded_here = 0, k, ok;
    void *ucp;

    /* An application that uses UCP has it loaded already; a UCT-only one gets it opened (and closed) here. */
    ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (ucp == NULL) {
        ucp         = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
        loaded_here = 1;
    }
    if (ucp == NULL) {
        fprintf(stderr, "libuct_gdx: cannot check the running UCX version: dlopen(libucp.so.0) failed: %s; "
                        "not registering the gdx transports\n", dlerror());
        return 0;
    }
    ok = uct_gdx_ucx_build_detect(&run, 0, why, sizeof(why));
    if (loaded_here) {
        dlclose(ucp);
    }
    if (!ok) {
        fprintf(stderr, "libuct_gdx: cannot check the running UCX: %s; not registering the gdx transports\n", why);
        return 0;
    }
    if (strcmp(run.version, GDX_UCT_BUILT_VERSION) != 0) {
        fprintf(stderr, "libuct_gdx: built against UCX internals of %s but running with UCX %s; not registering "
                        "the gdx transports (rebuild libuct_gdx against this UCX: scripts/fetch-ucx-src.sh, then "
                        "cmake)\n", GDX_UCT_BUILT_VERSION, run.version);
        return 0;
    }
    ok = 1;
    for (k = 0; k < UCT_GDX_UCX_LAYOUT_KEYS; ++k) {
        ok = ok && (run.value[k] == built[k]);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s=%d", k ? " " : "",
                 uct_gdx_ucx_key_names[k], built[k]);
    }
    if (!ok) {
        uct_gdx_ucx_build_layout(&run, have, sizeof(have));
        for (k = 0; (k < UCT_GDX_UCX_LAYOUT_KEYS) && (run.value[k] == built[k]); ++k) {
        }
        fprintf(stderr, "libuct_gdx: built for UCX %s [%s] but running with UCX %s [%s] (%s; %s: %s); not "
                        "registering the gdx transports (rebuild libuct_gdx against this UCX)\n",
                GDX_UCT_BUILT_VERSION, want, run.version, have, run.libucs, uct_gdx_ucx_key_names[k], run.how[k]);
        return 0;
    }
    return 1;
}

/* The mpirun check of uct_gdx_ompi.h, unless the preloaded loader made it: this process wants gdx when the loader
 * was preloaded or UCX_TLS names a gdx transport. */
static void uct_gdx_check_mpirun(void)
{
    const int *told  = (const int*)dlsym(RTLD_DEFAULT, "uct_gdx_ompi_told");
    const char *tls  = getenv("UCX_TLS");

    if ((told != NULL) ? *told : ((tls == NULL) || (strstr(tls, "gdx_") == NULL))) {
        return;
    }
    uct_gdx_ompi_check("libuct_gdx");
}

__attribute__((constructor)) static void uct_gdx_init(void)
{
    if (uct_gdx_build_ok()) {
        uct_gdx_check_mpirun();
        uct_gdx_register_all();
    }
}
