/* gdx_ucx_probe: says which UCX a runtime-only installation is (a distribution's libucx0 without ucx-utils or
 * headers: no ucx_info to print its version and config.h) and writes the config.h libuct_gdx must be compiled
 * with, reconstructed from the libraries themselves (uct_gdx_ucxbuild.h). cmake/GdxUcx.cmake builds and runs it
 * at configure time; it is plain C with no UCX header, so it builds before anything of UCX is known.
 *
 *   gdx_ucx_probe [--libdir DIR] [--config-h FILE]
 *     --libdir DIR     load DIR/libucp.so.0 (default: libucp.so.0 as the dynamic linker finds it)
 *     --config-h FILE  write the reconstructed config.h there
 * Prints "key=value<TAB>how it was determined" lines: version, libucp, libucs, then every configuration key.
 * Exit status: 0; 2 when no UCX can be loaded; 3 when a value config.h needs cannot be determined (one line on
 * stderr says which and why: a guess could compile a module that corrupts UCX's memory). */
#define _GNU_SOURCE
#include "uct_gdx_ucxbuild.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What UCX's configure finds out about the compiler and C library, found out the same way by the compiler that
 * compiles this file (GdxUcx.cmake uses the one that compiles the module). */
#if defined(__has_include)
#  if __has_include(<alloca.h>)
#    define PROBE_ALLOCA_H 1
#  endif
#  if __has_include(<ieee754.h>) /* 1.22's ucs/type/float8.h: glibc's union, or its own fallback without it */
#    define PROBE_IEEE754_H 1
#  endif
#endif
#if defined(__GNUC__) && !defined(__clang__)
#  define PROBE_NOOPTIMIZE 1          /* __attribute__((optimize("O0"))): GCC yes, clang ignores it with a warning */
#endif
#include <sched.h>
#ifdef CPU_SETSIZE
#  define PROBE_CPU_SET_T 1
#endif

static const char *libucp_path(void *ucp, char *buf, size_t size)
{
    void *sym = dlsym(ucp, "ucp_get_version");
    Dl_info info;

    if ((sym == NULL) || !dladdr(sym, &info) || (info.dli_fname == NULL)) {
        return "libucp.so.0";
    }
    snprintf(buf, size, "%s", info.dli_fname);
    return buf;
}

static void put_bool(FILE *f, const uct_gdx_ucx_build_t *b, int key, const char *macro, int zero_as_undef)
{
    fprintf(f, "/* %s */\n", b->how[key]);
    if (b->value[key] || !zero_as_undef) {
        fprintf(f, "#define %s %d\n\n", macro, b->value[key]);
    } else {
        fprintf(f, "/* #undef %s */\n\n", macro);
    }
}

static int write_config_h(const char *path, const uct_gdx_ucx_build_t *b, const char *ucp)
{
    unsigned major = 0, minor = 0;
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        fprintf(stderr, "gdx_ucx_probe: cannot write %s: %s\n", path, strerror(errno));
        return 0;
    }
    sscanf(b->version, "%u.%u", &major, &minor);
    fprintf(f, "/* config.h of UCX %s (%s), reconstructed by gdx_ucx_probe from the runtime libraries: there is no\n"
               " * ucx_info to print the real one. It holds the macros that UCX's internal headers compiled into\n"
               " * libuct_gdx read (tests/uct/test_ucx_config.sh checks the list), each with how it was determined.\n"
               " * Configure options (the layout keys first) are read off the libraries; compiler properties are\n"
               " * what this compiler offers, as UCX's configure finds them. */\n", b->version, ucp);
    fprintf(f, "#ifndef UCX_CONFIG_H\n#define UCX_CONFIG_H\n#define GDX_UCX_CONFIG_RECONSTRUCTED 1\n\n");
    fprintf(f, "#define VERSION \"%u.%u\"\n#define PACKAGE_VERSION \"%u.%u\"\n", major, minor, major, minor);
    fprintf(f, "#define UCX_CONFIGURE_FLAGS \"(unknown: config.h reconstructed by gdx_ucx_probe)\"\n\n");
    put_bool(f, b, UCT_GDX_UCX_ASSERT, "ENABLE_ASSERT", 1);            /* configure defines it only when on */
    put_bool(f, b, UCT_GDX_UCX_STATS, "ENABLE_STATS", 1);
    put_bool(f, b, UCT_GDX_UCX_DEBUG_DATA, "ENABLE_DEBUG_DATA", 0);
    fprintf(f, "/* %s */\n#define UCT_UD_EP_DEBUG_HOOKS %d\n\n", "set with ENABLE_DEBUG_DATA by UCX's configure",
            b->value[UCT_GDX_UCX_DEBUG_DATA]);
    put_bool(f, b, UCT_GDX_UCX_PARAMS_CHECK, "ENABLE_PARAMS_CHECK", 0);
    put_bool(f, b, UCT_GDX_UCX_BUILTIN_MEMCPY, "ENABLE_BUILTIN_MEMCPY", 0);
    put_bool(f, b, UCT_GDX_UCX_IB_HW_TM, "IBV_HW_TM", 1);
    fprintf(f, "/* %s */\n#define UCS_MAX_LOG_LEVEL %s\n\n", b->how[UCT_GDX_UCX_LOG_LEVEL],
            uct_gdx_ucx_log_levels[b->value[UCT_GDX_UCX_LOG_LEVEL]]);
    fprintf(f, "/* valgrind client requests: not compiled into the glue (they change no layout; UCX's default) */\n"
               "#define NVALGRIND 1\n\n");
    fprintf(f, "/* the last -O of UCX's compile (1.22+). Only '>= 2' is read (UCS_F_INLINE_OPTIMIZED: always inline), what\n"
               " * UCX's own -O3 default and distributions' -O2 both give; no layout depends on it. */\n"
               "#define OPTIMIZATION_LEVEL 2\n\n");
    fprintf(f, "/* HAVE_CACHE_LINE_SIZE (--with-cache-line-size) is left unset, UCX's default: from 1.18 on no\n"
               " * library trace shows it, and no code the glue compiles reads it (test_ucx_config.sh checks). */\n\n");
    fprintf(f, "/* the compiler and C library, as this compiler sees them */\n");
#ifdef PROBE_ALLOCA_H
    fprintf(f, "#define HAVE_ALLOCA_H 1\n");
#endif
#ifdef PROBE_IEEE754_H
    fprintf(f, "#define HAVE_IEEE754_H 1\n");
#endif
#ifdef PROBE_NOOPTIMIZE
    fprintf(f, "#define HAVE_ATTRIBUTE_NOOPTIMIZE 1\n");
#endif
#ifdef PROBE_CPU_SET_T
    fprintf(f, "#define HAVE_CPU_SET_T 1\n");
#endif
    fprintf(f, "#define HAVE___CLEAR_CACHE 1\n\n#endif\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "gdx_ucx_probe: writing %s failed: %s\n", path, strerror(errno));
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    const char *libdir = NULL, *config_h = NULL, *ucp_name;
    char path[1100], ucp_buf[1100], why[512];
    uct_gdx_ucx_build_t b;
    void *ucp;
    int i, k, undetermined = -1;

    for (i = 1; i < argc; ++i) {
        if ((strcmp(argv[i], "--libdir") == 0) && (i + 1 < argc)) {
            libdir = argv[++i];
        } else if ((strcmp(argv[i], "--config-h") == 0) && (i + 1 < argc)) {
            config_h = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--libdir DIR] [--config-h FILE]\n", argv[0]);
            return 2;
        }
    }
    snprintf(path, sizeof(path), "%s%slibucp.so.0", libdir ? libdir : "", libdir ? "/" : "");
    ucp = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (ucp == NULL) {
        fprintf(stderr, "gdx_ucx_probe: cannot load %s: %s\n", path, dlerror());
        return 2;
    }
    if (!uct_gdx_ucx_build_detect(&b, 1, why, sizeof(why))) {
        fprintf(stderr, "gdx_ucx_probe: %s after loading %s\n", why, path);
        return 2;
    }
    ucp_name = libucp_path(ucp, ucp_buf, sizeof(ucp_buf));
    printf("version=%s\tucp_get_version() of %s\n", b.version, ucp_name);
    printf("libucp=%s\tthe library the dynamic linker loaded for %s\n", ucp_name, path);
    printf("libucs=%s\tGNU build-id %s (any rebuild changes it; informative only)\n", b.libucs,
           b.build_id[0] ? b.build_id : "none");
    for (k = 0; k < UCT_GDX_UCX_NKEYS; ++k) {
        if (k == UCT_GDX_UCX_LOG_LEVEL) {
            printf("%s=%s\t%s\n", uct_gdx_ucx_key_names[k],
                   (b.value[k] < 0) ? "?" : uct_gdx_ucx_log_levels[b.value[k]], b.how[k]);
        } else {
            printf("%s=%d\t%s\n", uct_gdx_ucx_key_names[k], b.value[k], b.how[k]);
        }
        if ((b.value[k] < 0) && (undetermined < 0)) {
            undetermined = k;
        }
    }
    if (undetermined >= 0) {
        fprintf(stderr, "gdx_ucx_probe: cannot tell '%s' of UCX %s at %s (%s): a config.h cannot be reconstructed\n",
                uct_gdx_ucx_key_names[undetermined], b.version, b.libucs, b.how[undetermined]);
        return 3;
    }
    if ((config_h != NULL) && !write_config_h(config_h, &b, ucp_name)) {
        return 2;
    }
    return 0;
}
