/* Load-time entry of libuct_gdx: check that the running UCX is the one whose internal headers the module was
 * compiled against, then register the gdx components.
 *
 * Why a guard: the soname stays libuct.so.0 / libucp.so.0 across UCX releases, so nothing at link or load time
 * notices that uct_component_t, uct_iface_ops_t or uct_base_iface_t changed layout. Registering anyway would
 * corrupt memory. libuct and libucs export no version query, libucp does (ucp_get_version).
 *
 * Why a separate file: it is linked after libgdx_internal.a, so its constructor runs after the C++ static
 * initializers of gdx's transports (the ELF .init_array follows link order), which the registration calls. */

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifndef GDX_UCT_BUILT_VERSION
#error "GDX_UCT_BUILT_VERSION (the UCX version of the internal headers) must be defined by the build"
#endif

void uct_gdx_register_all(void);

/* Returns 1 when the running UCX matches GDX_UCT_BUILT_VERSION. Messages go to stderr with fprintf: on a
 * mismatch even UCS's logger (ucs_global_opts' layout) cannot be trusted. */
static int uct_gdx_version_ok(void)
{
    void (*get_version)(unsigned*, unsigned*, unsigned*);
    unsigned major = 0, minor = 0, release = 0;
    char running[64];
    int loaded_here = 0;
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
    *(void**)&get_version = dlsym(ucp, "ucp_get_version");
    if (get_version == NULL) {
        fprintf(stderr, "libuct_gdx: libucp.so.0 has no ucp_get_version (%s); not registering the gdx "
                        "transports\n", dlerror());
        if (loaded_here) {
            dlclose(ucp);
        }
        return 0;
    }
    get_version(&major, &minor, &release);
    if (loaded_here) {
        dlclose(ucp);
    }
    snprintf(running, sizeof(running), "%u.%u.%u", major, minor, release);
    if (strcmp(running, GDX_UCT_BUILT_VERSION) != 0) {
        fprintf(stderr, "libuct_gdx: built against UCX internals of %s but running with UCX %s; not registering "
                        "the gdx transports (rebuild libuct_gdx against this UCX: scripts/fetch-ucx-src.sh, then "
                        "cmake)\n", GDX_UCT_BUILT_VERSION, running);
        return 0;
    }
    return 1;
}

__attribute__((constructor)) static void uct_gdx_init(void)
{
    if (uct_gdx_version_ok()) {
        uct_gdx_register_all();
    }
}
