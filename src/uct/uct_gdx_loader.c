/* libuct_gdx_loader.so: what a process preloads (or links) to get gdx's transports into a UCX older than 1.22,
 * which loads only the modules named at its configure time (README.md, "Loading").
 *
 * Why a loader instead of preloading libuct_gdx.so.0 itself: the module fills in UCX's internal structs, so each
 * build fits one UCX version *and* configuration (ENABLE_ASSERT, ENABLE_STATS, ENABLE_DEBUG_DATA change layouts).
 * Preloaded into another UCX it cannot even be linked (UCX 1.16 lacks symbols 1.13 had: the dynamic linker kills
 * every process, `true` included, with "undefined symbol"). The loader links nothing of UCX and reads nothing of
 * its internals: it asks libucp for its version (ucp_get_version, public), reads the configuration off the
 * loaded libucs/libuct (uct_gdx_ucxbuild.h), then dlopen()s the libuct_gdx build whose manifest names that
 * version and configuration. The GNU build-id of libucs is only reported: every rebuild changes it, a
 * distribution's security rebuild with the same options included, which must keep working. dlopen() reports a
 * failure instead of killing the process. Any mismatch is one line on stderr and the process goes on with UCX's
 * own transports.
 *
 * Where builds are looked for: the colon-separated LIBUCT_GDX_PATH (directories holding libuct_gdx.so.0 and its
 * manifest libuct_gdx.ucx, e.g. a build tree's src/uct), then <loader's directory>/gdx/ucx/<any>/
 * (what `cmake --install` lays out). The variable is not GDX_* or UCX_*: both libraries warn about unknown
 * variables of their prefix. */
#define _GNU_SOURCE
#include "uct_gdx_ompi.h"
#include "uct_gdx_ucxbuild.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOADER "libuct_gdx_loader"
#define MANIFEST "libuct_gdx.ucx"
#define MODULE "libuct_gdx.so.0"

/* Set when this loader has checked the Open MPI settings, so that libuct_gdx, loaded into the same process by
 * UCX >= 1.22 later, does not say it again (uct_gdx_ompi.h). The one symbol the loader exports. */
__attribute__((visibility("default"))) int uct_gdx_ompi_told;

/* Copies a string, cut to the destination (manifest values and paths longer than that are not ours). */
static void loader_copy(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- the builds on offer -------------------------------------------------------------------------------- */

typedef struct {
    char version[32];
    int  layout[UCT_GDX_UCX_LAYOUT_KEYS];  /* assert, stats, debug_data; -1 when the manifest lacks the key */
    char build_id[129];                    /* of the libucs it was built against: informative */
    char config[128];                      /* the configuration tag, for messages */
} loader_manifest_t;

/* Reads the "key=value" lines of a manifest (written by src/uct/CMakeLists.txt); 0 when unreadable. */
static int loader_read_manifest(const char *dir, loader_manifest_t *m)
{
    char path[4200], line[512];
    FILE *f;
    int k;

    snprintf(path, sizeof(path), "%s/" MANIFEST, dir);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    memset(m, 0, sizeof(*m));
    for (k = 0; k < UCT_GDX_UCX_LAYOUT_KEYS; ++k) {
        m->layout[k] = -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *eq = strchr(line, '=');
        line[strcspn(line, "\n")] = '\0';
        if (eq == NULL) {
            continue;
        }
        *eq = '\0';
        if (strcmp(line, "version") == 0) {
            loader_copy(m->version, sizeof(m->version), eq + 1);
        } else if (strcmp(line, "libucs_build_id") == 0) {
            loader_copy(m->build_id, sizeof(m->build_id), eq + 1);
        } else if (strcmp(line, "config") == 0) {
            loader_copy(m->config, sizeof(m->config), eq + 1);
        }
        for (k = 0; k < UCT_GDX_UCX_LAYOUT_KEYS; ++k) {
            if ((strcmp(line, uct_gdx_ucx_key_names[k]) == 0) && ((eq[1] == '0') || (eq[1] == '1'))) {
                m->layout[k] = eq[1] - '0';
            }
        }
    }
    fclose(f);
    return m->version[0] != '\0';
}

typedef struct {
    const uct_gdx_ucx_build_t *ucx;
    char                       match[4200];  /* directory of the matching build */
    char                       seen[2048];   /* what was on offer, for the refusal line */
} loader_search_t;

static void loader_consider(loader_search_t *s, const char *dir)
{
    char item[600], layout[96] = "";
    loader_manifest_t m;
    int k, same;

    if ((s->match[0] != '\0') || !loader_read_manifest(dir, &m)) {
        return;
    }
    /* Same version and the same layout keys. A manifest without them (built before they were recorded) cannot
     * be matched: refused like another configuration. */
    same = (strcmp(m.version, s->ucx->version) == 0);
    for (k = 0; k < UCT_GDX_UCX_LAYOUT_KEYS; ++k) {
        same = same && (m.layout[k] >= 0) && (m.layout[k] == s->ucx->value[k]);
        snprintf(layout + strlen(layout), sizeof(layout) - strlen(layout), "%s%s=%c", k ? " " : "",
                 uct_gdx_ucx_key_names[k], (m.layout[k] < 0) ? '?' : (char)('0' + m.layout[k]));
    }
    if (same) {
        snprintf(s->match, sizeof(s->match), "%s", dir);
        return;
    }
    snprintf(item, sizeof(item), "%s%s [%s, built on libucs build-id %.12s] in %.300s",
             (s->seen[0] != '\0') ? "; " : "", m.version, layout, (m.build_id[0] != '\0') ? m.build_id : "none",
             dir);
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

/* ---- the running UCX -------------------------------------------------------------------------------------- */

/* 0 with one line printed when there is no UCX to ask. */
static int loader_running_ucx(uct_gdx_ucx_build_t *ucx)
{
    char why[512];
    void *ucp;

    /* An application that uses UCP has it loaded; one that opens UCX later (Open MPI's pml ucx) gets it loaded
     * here, global and for good, as preloading the module always did. */
    ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (ucp == NULL) {
        ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_GLOBAL);
    }
    if (ucp == NULL) {
        fprintf(stderr, LOADER ": no UCX here: dlopen(libucp.so.0) failed: %s; gdx transports not loaded\n",
                dlerror());
        return 0;
    }
    if (!uct_gdx_ucx_build_detect(ucx, 0, why, sizeof(why))) {
        fprintf(stderr, LOADER ": %s; gdx transports not loaded\n", why);
        return 0;
    }
    return 1;
}

__attribute__((constructor)) static void uct_gdx_loader_init(void)
{
    static uct_gdx_ucx_build_t ucx;
    static loader_search_t s;
    char module[4300], layout[96], *list, *dir, *save;
    const char *env = getenv("LIBUCT_GDX_PATH");
    Dl_info self;
    void *dl;
    int k;

    if (!loader_running_ucx(&ucx)) {
        uct_gdx_ompi_told = uct_gdx_ompi_check(LOADER);
        return;
    }
    if ((strncmp(ucx.version, "1.", 2) != 0) || (atoi(ucx.version + 2) >= 22)) {
        /* UCX 1.22 loads libuct_gdx.so.0 itself (<libdir>/ucx/ or UCX_PLUGIN_PATH); loading it here as well
         * would register every gdx component twice. The mpirun check stays: whoever preloads the loader wants
         * gdx, and UCX may never load the module into a rank whose pml is not ucx. */
        uct_gdx_ompi_told = uct_gdx_ompi_check(LOADER);
        return;
    }
    for (k = 0; k < UCT_GDX_UCX_LAYOUT_KEYS; ++k) {
        if (ucx.value[k] < 0) {
            fprintf(stderr, LOADER ": cannot tell whether the running UCX %s (%s) is built with %s: %s; gdx "
                    "transports not loaded, UCX's own transports unaffected\n", ucx.version, ucx.libucs,
                    uct_gdx_ucx_key_names[k], ucx.how[k]);
            uct_gdx_ompi_told = uct_gdx_ompi_check(LOADER);
            return;
        }
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
    uct_gdx_ucx_build_layout(&ucx, layout, sizeof(layout));
    if (s.match[0] == '\0') {
        fprintf(stderr, LOADER ": no libuct_gdx build for the running UCX %s [%s] (%s, build-id %.12s); on offer: "
                "%s; gdx transports not loaded, UCX's own transports unaffected (build gdx against this UCX: "
                "src/uct/README.md)\n", ucx.version, layout, ucx.libucs,
                ucx.build_id[0] ? ucx.build_id : "none", s.seen[0] ? s.seen : "none (set LIBUCT_GDX_PATH)");
        uct_gdx_ompi_told = uct_gdx_ompi_check(LOADER);
        return;
    }
    snprintf(module, sizeof(module), "%s/" MODULE, s.match);
    /* The module checks the mpirun line itself once loaded (uct_gdx_init.c). */
    dl = dlopen(module, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == NULL) {
        fprintf(stderr, LOADER ": %s matches UCX %s [%s] but does not load: %s; gdx transports not loaded\n", module,
                ucx.version, layout, dlerror());
        uct_gdx_ompi_told = uct_gdx_ompi_check(LOADER);
    }
}
