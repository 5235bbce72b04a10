/* gdx public status codes. Stable numbering: values are part of the ABI. */
#ifndef GDX_STATUS_H
#define GDX_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gdx_status {
    GDX_OK                    = 0,
    GDX_INPROGRESS            = 1,   /* accepted; completion is reported later */

    GDX_ERR_NO_RESOURCE       = -1,  /* back-pressure: retry after progress, or queue as pending */
    GDX_ERR_INVALID_PARAM     = -2,  /* null pointer, zero length where forbidden, bad flags */
    GDX_ERR_NO_MEMORY         = -3,
    GDX_ERR_UNSUPPORTED       = -4,  /* the operation or memory kind is not supported here */
    GDX_ERR_NOT_FOUND         = -5,
    GDX_ERR_UNREACHABLE       = -6,  /* no transport reaches the peer or the memory */
    GDX_ERR_IO                = -7,  /* a system call failed; the log line names it and errno */
    GDX_ERR_TIMEOUT           = -8,
    GDX_ERR_CONNECTION_RESET  = -9,  /* the peer went away; outstanding operations fail with this */
    GDX_ERR_CANCELED          = -10,
    GDX_ERR_ACCESS_DENIED     = -11, /* remote key does not cover the range or the access */
    GDX_ERR_PROTOCOL          = -12, /* malformed or unexpected wire message */
    GDX_ERR_NO_DEVICE         = -13,
    GDX_ERR_BUSY              = -14,
    GDX_ERR_INVALID_CONFIG    = -15, /* a GDX_* value could not be parsed or is out of range */
    GDX_ERR_DRIVER            = -16, /* the CUDA driver or the verbs provider returned an error */
    GDX_ERR_INVALID_ADDR      = -17, /* pointer not mapped, freed, or not what the caller claims */
    GDX_ERR_INTERNAL          = -18
} gdx_status_t;

/* Static, never NULL: "unknown status" for values outside the table. */
const char *gdx_status_string(gdx_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* GDX_STATUS_H */
