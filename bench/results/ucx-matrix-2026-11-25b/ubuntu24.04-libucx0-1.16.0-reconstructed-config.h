/* config.h of UCX 1.16.0 (/lib/x86_64-linux-gnu/libucp.so.0), reconstructed by gdx_ucx_probe from the runtime libraries: there is no
 * ucx_info to print the real one. It holds the macros that UCX's internal headers compiled into
 * libuct_gdx read (tests/uct/test_ucx_config.sh checks the list), each with how it was determined.
 * Configure options (the layout keys first) are read off the libraries; compiler properties are
 * what this compiler offers, as UCX's configure finds them. */
#ifndef UCX_CONFIG_H
#define UCX_CONFIG_H
#define GDX_UCX_CONFIG_RECONSTRUCTED 1

#define VERSION "1.16"
#define PACKAGE_VERSION "1.16"
#define UCX_CONFIGURE_FLAGS "(unknown: config.h reconstructed by gdx_ucx_probe)"

/* from the library: 5 of 5 traces there (ucs_assert() expressions of async.c/parser.c in libucs) */
#define ENABLE_ASSERT 1

/* from the library: 0 of 2 traces there (STATS_DEST in libucs, its symbol ucs_stats_node_alloc) */
/* #undef ENABLE_STATS */

/* from the library: 0 of 2 traces there (MPOOL_FIFO, the default 'bt,freeze' in libucs) */
#define ENABLE_DEBUG_DATA 0

/* set with ENABLE_DEBUG_DATA by UCX's configure */
#define UCT_UD_EP_DEBUG_HOOKS 0

/* from the library: 1 of 1 traces there (UCT_CHECK_PARAM message in libuct) */
#define ENABLE_PARAMS_CHECK 1

/* from the library: 1 of 1 traces there (BUILTIN_MEMCPY_MIN in libucs) */
#define ENABLE_BUILTIN_MEMCPY 1

/* from the modules: the tag-matching message is in /lib/x86_64-linux-gnu/ucx/libuct_ib*.so.0 */
#define IBV_HW_TM 1

/* from the library: messages in libucs at debug 2/2, trace_async 2/2, trace_func 1/1, trace_poll 1/1 */
#define UCS_MAX_LOG_LEVEL UCS_LOG_LEVEL_TRACE_POLL

/* valgrind client requests: not compiled into the glue (they change no layout; UCX's default) */
#define NVALGRIND 1

/* HAVE_CACHE_LINE_SIZE (--with-cache-line-size) is left unset, UCX's default: from 1.18 on no
 * library trace shows it, and no code the glue compiles reads it (test_ucx_config.sh checks). */

/* the compiler and C library, as this compiler sees them */
#define HAVE_ALLOCA_H 1
#define HAVE_ATTRIBUTE_NOOPTIMIZE 1
#define HAVE_CPU_SET_T 1
#define HAVE___CLEAR_CACHE 1

#endif
