/* gdx: GPUDirect-aware communication transport. Public C API.
 *
 * Every function returns a gdx_status_t (or is void); on failure gdx_last_error() returns this thread's last
 * error message, which names what failed and why. No C++ exception crosses this boundary. */
#ifndef GDX_GDX_H
#define GDX_GDX_H

#include <stddef.h>
#include <stdint.h>

#include "gdx/status.h"

#define GDX_VERSION_MAJOR 0
#define GDX_VERSION_MINOR 1

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library actually loaded (may differ from the GDX_VERSION_* the caller was built with). */
void gdx_version(unsigned *major, unsigned *minor);
const char *gdx_version_string(void);

/* This thread's last error message ("" when none). Valid until the next gdx call on this thread. */
const char *gdx_last_error(void);

/* ---- configuration ------------------------------------------------------------------------------------
 * Values set here override the environment's GDX_* variables. gdx_config_set validates at once: an unknown
 * name or an invalid value returns GDX_ERR_INVALID_CONFIG with a message naming the variable, the value and
 * what is accepted. */
typedef struct gdx_config gdx_config_t;
gdx_status_t gdx_config_create(gdx_config_t **config_p);
gdx_status_t gdx_config_set(gdx_config_t *config, const char *name, const char *value);
void gdx_config_destroy(gdx_config_t *config);

/* ---- context ------------------------------------------------------------------------------------------
 * A context parses the configuration once (defaults, environment, then `config`, which may be NULL), applies
 * logging, and ties memory detection, transports and staging together. */
typedef struct gdx_context gdx_context_t;
gdx_status_t gdx_context_create(const gdx_config_t *config, gdx_context_t **context_p);
void gdx_context_destroy(gdx_context_t *context);

/* Value of a configuration variable as the context parsed it (the text form), or NULL when unknown. */
const char *gdx_context_config_get(const gdx_context_t *context, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* GDX_GDX_H */
