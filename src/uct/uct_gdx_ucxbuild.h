/* What UCX build runs in this process: its version and the configure options that change what code compiled
 * against UCX's internal headers must assume, determined from the loaded libraries themselves (no ucx_info, no
 * config.h, nothing of UCX linked). Used by libuct_gdx_loader.so (which build to load), libuct_gdx's own guard
 * (refuse to register into another configuration) and gdx_ucx_probe (a runtime-only UCX: config.h for the build).
 *
 * Why from the libraries: the soname stays libucs.so.0 across releases and configurations, a runtime-only UCX
 * (a distribution's libucx0 without ucx-utils) has no ucx_info to print its config.h, and any rebuild changes
 * the GNU build-id, which therefore says nothing about layouts. What a configure option compiles in or out
 * leaves traces in the read-only data of the libraries: the expressions of ucs_assert(), the names in UCS's
 * configuration tables, log messages of a level. Each value below names the traces it was read from; traces
 * that disagree give "cannot tell" (-1), never a guess. The traces were checked against UCX 1.13.1, 1.16.0,
 * 1.18.1 and 1.22.0 built with and without each option (tests/uct/test_ucx_config.sh compares the result with
 * ucx_info -b wherever UCX's own tool is there). */
#ifndef UCT_GDX_UCXBUILD_H
#define UCT_GDX_UCXBUILD_H

#include <stddef.h>

enum {
    /* Layout keys: they change struct layouts or inline code that works on UCX's own objects (ENABLE_ASSERT: the
     * async context's mutex; ENABLE_STATS: uct_base_iface_t and friends; ENABLE_DEBUG_DATA: mpool inline code).
     * A module is usable only in a UCX whose three match the config.h it was compiled with. */
    UCT_GDX_UCX_ASSERT,
    UCT_GDX_UCX_STATS,
    UCT_GDX_UCX_DEBUG_DATA,
    /* Code-only keys: what UCX's inline functions check or log (config.h needs them, layouts do not). */
    UCT_GDX_UCX_PARAMS_CHECK,
    UCT_GDX_UCX_BUILTIN_MEMCPY,
    UCT_GDX_UCX_LOG_LEVEL,     /* an index into uct_gdx_ucx_log_levels */
    UCT_GDX_UCX_IB_HW_TM,      /* only when modules are scanned (uct_gdx_ucx_build_detect's with_modules) */
    UCT_GDX_UCX_NKEYS
};
#define UCT_GDX_UCX_LAYOUT_KEYS 3

typedef struct {
    char version[32];           /* "1.16.0", from ucp_get_version() */
    char libucs[1024];          /* path of the loaded libucs.so.0 */
    char build_id[129];         /* its GNU build-id in hex, "" when none */
    int  value[UCT_GDX_UCX_NKEYS];  /* 0/1 (a level index for LOG_LEVEL); -1 = cannot tell */
    char how[UCT_GDX_UCX_NKEYS][400];
} uct_gdx_ucx_build_t;

/* Manifest and config names of the keys: "assert", "stats", ... */
extern const char *const uct_gdx_ucx_key_names[UCT_GDX_UCX_NKEYS];
/* config.h values of UCS_MAX_LOG_LEVEL the traces can tell apart, lowest first. */
extern const char *const uct_gdx_ucx_log_levels[];

/* Fills *b from the UCX loaded in this process (libucp, libuct, libucs must be loaded: the caller dlopen()s
 * libucp.so.0, which brings the other two). with_modules: also read <libucs dir>/ucx/libuct_ib*.so.0 from disk for
 * UCT_GDX_UCX_IB_HW_TM (else -1). Returns 0 and a reason in why when UCX is not loaded or has no version query;
 * undetermined keys are -1 with the reason in b->how. */
int uct_gdx_ucx_build_detect(uct_gdx_ucx_build_t *b, int with_modules, char *why, size_t why_size);

/* "assert=1 stats=0 debug_data=0" (the layout keys, -1 printed as "?") into buf. */
void uct_gdx_ucx_build_layout(const uct_gdx_ucx_build_t *b, char *buf, size_t size);

#endif
