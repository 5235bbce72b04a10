/* The running UCX's version and build configuration, read off the loaded libraries (uct_gdx_ucxbuild.h says why).
 * Links nothing of UCX: the loader that uses it must run in processes of any UCX version. */
#define _GNU_SOURCE
#include "uct_gdx_ucxbuild.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const uct_gdx_ucx_key_names[UCT_GDX_UCX_NKEYS] = {
    "assert", "stats", "debug_data", "params_check", "builtin_memcpy", "log_level", "ib_hw_tm"
};

const char *const uct_gdx_ucx_log_levels[] = {
    "UCS_LOG_LEVEL_DEBUG", "UCS_LOG_LEVEL_TRACE_ASYNC", "UCS_LOG_LEVEL_TRACE_FUNC", "UCS_LOG_LEVEL_TRACE_POLL", NULL
};

/* ---- traces: strings that one configure option compiles in or out (same text in 1.13.1 .. 1.22.0) ---------- */

/* ucs_assert() is ucs_assert_always() with assertions and nothing without; its expression becomes a string.
 * These five are plain ucs_assert() calls in async.c and parser.c. */
static const char *const assert_traces[] = {
    "handler->async == async", "(handler->id >= min_id) && (handler->id < max_id)", "event_id == event_fd",
    "status_restore == UCS_OK", "num_fields == 2", NULL
};
/* global_opts.c lists STATS_DEST only under ENABLE_STATS, MPOOL_FIFO and the "bt,freeze" error-handling default
 * only under ENABLE_DEBUG_DATA. */
static const char *const stats_traces[]      = {"STATS_DEST", NULL};
static const char *const debug_data_traces[] = {"MPOOL_FIFO", "bt,freeze", NULL};
/* UCT_CHECK_PARAM's message in the tcp/sm transports of libuct: dead code without ENABLE_PARAMS_CHECK. */
static const char *const params_traces[]     = {"UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined", NULL};
/* x86_64/global_opts.c has BUILTIN_MEMCPY_MIN only under ENABLE_BUILTIN_MEMCPY. */
static const char *const memcpy_traces[]     = {"BUILTIN_MEMCPY_MIN", NULL};
/* Messages of async.c/parser.c by log level (ucs_trace_poll, ucs_trace_func, ucs_trace_async, ucs_debug): a
 * level above UCS_MAX_LOG_LEVEL is compiled out. */
static const char *const poll_traces[]       = {"async=%p", NULL};
static const char *const func_traces[]       = {"%s(async=%p)", NULL};
static const char *const async_traces[]      = {"miss handler", "handler for %d not found - ignoring", NULL};
static const char *const debug_traces[]      = {"parsed config file %s",
                                                "async handler [id=%d] not found in hash table", NULL};
/* rc_mlx5_common.c, only under IBV_HW_TM (rdma-core with tag matching). */
static const char *const tm_traces[]         = {"Failed to allocate memory for tag matching list", NULL};

/* ---- the loaded images ---------------------------------------------------------------------------------- */

#define MAX_SPANS 8

typedef struct {
    const char *prefix;                    /* "libucs.so": file name prefix of the library */
    char        path[1024];
    const char *start[MAX_SPANS];          /* read-only, non-executable segments (.rodata, .dynstr, ...) */
    size_t      len[MAX_SPANS];
    int         nspans;
    char        build_id[129];
    int         found;
} image_t;

static void note_build_id(const ElfW(Phdr) *ph, ElfW(Addr) base, char *out, size_t out_size)
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
            return;
        }
        p = (const char*)desc + ((nh->n_descsz + 3) & ~3u);
    }
}

static int find_images(struct dl_phdr_info *info, size_t size, void *arg)
{
    image_t *img = arg;                    /* NULL-prefix terminated array */
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base  = (slash != NULL) ? slash + 1 : info->dlpi_name;
    int i;

    (void)size;
    for (; img->prefix != NULL; ++img) {
        if (img->found || (strncmp(base, img->prefix, strlen(img->prefix)) != 0)) {
            continue;
        }
        img->found = 1;
        snprintf(img->path, sizeof(img->path), "%s", info->dlpi_name);
        for (i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
            if ((ph->p_type == PT_LOAD) && (ph->p_flags & PF_R) && !(ph->p_flags & (PF_W | PF_X)) &&
                (img->nspans < MAX_SPANS)) {
                img->start[img->nspans] = (const char*)(info->dlpi_addr + ph->p_vaddr);
                img->len[img->nspans++] = ph->p_filesz;
            } else if ((ph->p_type == PT_NOTE) && (img->build_id[0] == '\0')) {
                note_build_id(ph, info->dlpi_addr, img->build_id, sizeof(img->build_id));
            }
        }
    }
    return 0;
}

/* Whether s occurs as a whole C string (its NUL included, a non-printable byte or the start before it). */
static int span_has(const char *p, size_t n, const char *s)
{
    size_t len = strlen(s) + 1;
    const char *end = p + n, *q = p;

    while ((q < end) && ((q = memmem(q, (size_t)(end - q), s, len)) != NULL)) {
        if ((q == p) || ((unsigned char)q[-1] < 0x20) || ((unsigned char)q[-1] >= 0x7f)) {
            return 1;
        }
        ++q;
    }
    return 0;
}

static int image_count(const image_t *img, const char *const *traces, int *total)
{
    int n = 0, i;

    for (*total = 0; traces[*total] != NULL; ++*total) {
        for (i = 0; i < img->nspans; ++i) {
            if (span_has(img->start[i], img->len[i], traces[*total])) {
                ++n;
                break;
            }
        }
    }
    return n;
}

/* All traces there: 1, none: 0, some: cannot tell. */
static void decide(uct_gdx_ucx_build_t *b, int key, int present, int total, const char *what)
{
    b->value[key] = (present == total) ? 1 : (present == 0) ? 0 : -1;
    snprintf(b->how[key], sizeof(b->how[key]), "%s: %d of %d traces there (%s)", (b->value[key] < 0) ?
             "cannot tell" : "from the library", present, total, what);
}

/* ---- modules on disk (not loaded by the probing process) -------------------------------------------------- */

/* 1 when the file holds one of the traces, 0 when not, -1 (errno text in why) when it cannot be read. */
static int file_has_any(const char *path, const char *const *traces, char *why, size_t why_size)
{
    struct stat st;
    const char *p;
    int fd, found = 0, i;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if ((fd < 0) || (fstat(fd, &st) != 0)) {
        snprintf(why, why_size, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    p = (st.st_size > 0) ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(why, why_size, "cannot map %s: %s", path, strerror(errno));
        return -1;
    }
    for (i = 0; (traces[i] != NULL) && !found; ++i) {
        found = span_has(p, (size_t)st.st_size, traces[i]);
    }
    munmap((void*)p, (size_t)st.st_size);
    return found;
}

static void detect_ib_hw_tm(uct_gdx_ucx_build_t *b)
{
    char pattern[1100], err[300] = "";
    const char *slash = strrchr(b->libucs, '/');
    glob_t g;
    size_t i;
    int r, any = 0, bad = 0;

    snprintf(pattern, sizeof(pattern), "%.*s/ucx/libuct_ib*.so.0", (slash != NULL) ? (int)(slash - b->libucs) : 1,
             (slash != NULL) ? b->libucs : ".");
    r = glob(pattern, 0, NULL, &g);
    if (r == GLOB_NOMATCH) {
        b->value[UCT_GDX_UCX_IB_HW_TM] = 0;
        snprintf(b->how[UCT_GDX_UCX_IB_HW_TM], sizeof(b->how[0]), "from the modules: no %.200s (built without verbs)",
                 pattern);
        return;
    }
    if (r != 0) {
        b->value[UCT_GDX_UCX_IB_HW_TM] = -1;
        snprintf(b->how[UCT_GDX_UCX_IB_HW_TM], sizeof(b->how[0]), "cannot tell: glob(%.200s) failed (%d)", pattern, r);
        return;
    }
    for (i = 0; i < g.gl_pathc; ++i) {
        r = file_has_any(g.gl_pathv[i], tm_traces, err, sizeof(err));
        any |= (r == 1);
        bad |= (r < 0);
    }
    b->value[UCT_GDX_UCX_IB_HW_TM] = any ? 1 : bad ? -1 : 0;
    snprintf(b->how[UCT_GDX_UCX_IB_HW_TM], sizeof(b->how[0]), "%s: the tag-matching message is %s %.200s%s%.120s",
             bad && !any ? "cannot tell" : "from the modules", any ? "in" : "in none of", pattern,
             err[0] ? "; " : "", err);
    globfree(&g);
}

/* ---- all together ------------------------------------------------------------------------------------- */

int uct_gdx_ucx_build_detect(uct_gdx_ucx_build_t *b, int with_modules, char *why, size_t why_size)
{
    image_t img[] = {{.prefix = "libucs.so"}, {.prefix = "libuct.so"}, {.prefix = NULL}};
    void (*get_version)(unsigned*, unsigned*, unsigned*);
    unsigned major = 0, minor = 0, release = 0;
    int n, total, level, present[4], totals[4], k;
    void *h;

    memset(b, 0, sizeof(*b));
    for (k = 0; k < UCT_GDX_UCX_NKEYS; ++k) {
        b->value[k] = -1;
        snprintf(b->how[k], sizeof(b->how[k]), "not looked at");
    }
    h = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) {
        snprintf(why, why_size, "libucp.so.0 is not loaded in this process");
        return 0;
    }
    *(void**)&get_version = dlsym(h, "ucp_get_version");
    dlclose(h);                            /* drops only the reference NOLOAD took */
    if (get_version == NULL) {
        snprintf(why, why_size, "libucp.so.0 has no ucp_get_version");
        return 0;
    }
    get_version(&major, &minor, &release);
    snprintf(b->version, sizeof(b->version), "%u.%u.%u", major, minor, release);

    dl_iterate_phdr(find_images, img);
    if (!img[0].found || !img[1].found || (img[0].nspans == 0) || (img[1].nspans == 0)) {
        snprintf(why, why_size, "libucs.so.0 or libuct.so.0 is not loaded (or has no read-only segment)");
        return 0;
    }
    snprintf(b->libucs, sizeof(b->libucs), "%s", img[0].path);
    snprintf(b->build_id, sizeof(b->build_id), "%s", img[0].build_id);

    n = image_count(&img[0], assert_traces, &total);
    decide(b, UCT_GDX_UCX_ASSERT, n, total, "ucs_assert() expressions of async.c/parser.c in libucs");
    /* ENABLE_STATS: the stats API exists as a symbol only then, besides the configuration name. */
    n = image_count(&img[0], stats_traces, &total);
    h = dlopen(img[0].path, RTLD_LAZY | RTLD_NOLOAD);
    n += (h != NULL) && (dlsym(h, "ucs_stats_node_alloc") != NULL);
    if (h != NULL) {
        dlclose(h);
    }
    decide(b, UCT_GDX_UCX_STATS, n, total + 1, "STATS_DEST in libucs, its symbol ucs_stats_node_alloc");
    n = image_count(&img[0], debug_data_traces, &total);
    decide(b, UCT_GDX_UCX_DEBUG_DATA, n, total, "MPOOL_FIFO, the default 'bt,freeze' in libucs");
    n = image_count(&img[1], params_traces, &total);
    decide(b, UCT_GDX_UCX_PARAMS_CHECK, n, total, "UCT_CHECK_PARAM message in libuct");
    n = image_count(&img[0], memcpy_traces, &total);
    decide(b, UCT_GDX_UCX_BUILTIN_MEMCPY, n, total, "BUILTIN_MEMCPY_MIN in libucs");

    /* The highest level with a message in libucs; levels in between (trace .. trace_data) leave no trace of
     * their own here and compile the glue the same apart from trace logs. */
    present[0] = image_count(&img[0], debug_traces, &totals[0]);
    present[1] = image_count(&img[0], async_traces, &totals[1]);
    present[2] = image_count(&img[0], func_traces, &totals[2]);
    present[3] = image_count(&img[0], poll_traces, &totals[3]);
    for (level = 3; (level >= 0) && (present[level] == 0); --level) {
    }
    b->value[UCT_GDX_UCX_LOG_LEVEL] = level;
    snprintf(b->how[UCT_GDX_UCX_LOG_LEVEL], sizeof(b->how[0]),
             "%s: messages in libucs at debug %d/%d, trace_async %d/%d, trace_func %d/%d, trace_poll %d/%d",
             (level < 0) ? "cannot tell" : "from the library", present[0], totals[0], present[1], totals[1],
             present[2], totals[2], present[3], totals[3]);
    if (with_modules) {
        detect_ib_hw_tm(b);
    }
    return 1;
}

void uct_gdx_ucx_build_layout(const uct_gdx_ucx_build_t *b, char *buf, size_t size)
{
    size_t off = 0;
    int k;

    buf[0] = '\0';
    for (k = 0; (k < UCT_GDX_UCX_LAYOUT_KEYS) && (off < size); ++k) {
        int w = (b->value[k] < 0) ? snprintf(buf + off, size - off, "%s%s=?", k ? " " : "", uct_gdx_ucx_key_names[k])
                                  : snprintf(buf + off, size - off, "%s%s=%d", k ? " " : "",
                                             uct_gdx_ucx_key_names[k], b->value[k]);
        off += (w > 0) ? (size_t)w : 0;
    }
}
