/* Lockstep example: a driver module with one device, "example:0", whose
 * only kernel is lk_binary's add and mul on f32 tensors (docs/drivers.md).
 * Every other op, and lk_binary on other dtypes, is refused through
 * supports(), so the core answers LK_ERR_UNSUPPORTED for it.
 *
 * It needs nothing but the installed headers, and links nothing of
 * Lockstep's:
 *
 *   cc -std=c11 -O2 -ffp-contract=off -fPIC -shared -fvisibility=hidden \
 *      $(pkg-config --cflags lockstep) binary_f32.c -o lockstep-example.so
 *   LOCKSTEP_DRIVER_PATH=$PWD lockstep info
 *   LOCKSTEP_DRIVER_PATH=$PWD lockstep check --device example:0
 *
 * The device has host memory, so the core allocates and copies for it and
 * runs each op on the calling thread, with the canonical floating-point
 * environment already set (docs/numerics.md section 2). */
#include <stdint.h>
#include <string.h>

#include <lockstep/driver.h>

static const lk_host *host;

/* docs/numerics.md section 3: every f32 store writes a NaN as 0x7fc00000 */
static void store_f32(float *p, float v)
{
    if (v != v) {
        const uint32_t nan = 0x7fc00000u;
        memcpy(p, &nan, sizeof nan);
    } else {
        *p = v;
    }
}

/* The core has checked the shapes, dtypes and memory and normalised the
 * tensors; supports() below has limited the call to f32 add and mul. */
static lk_status ex_binary(void *queue, const lk_binary_args *a)
{
    (void)queue;
    const float *x = a->a.data, *w = a->b.data;
    float *y = a->y.data;
    for (int64_t r = 0; r < a->a.rows; r++) {
        const float *xr = x + r * a->a.ld;
        const float *wr = w + (a->b.rows == 1 ? 0 : r * a->b.ld); /* broadcast */
        float *yr = y + r * a->y.ld;
        for (int64_t c = 0; c < a->a.cols; c++)
            store_f32(&yr[c], a->op == LK_BINARY_ADD ? xr[c] + wr[c] : xr[c] * wr[c]);
    }
    return LK_OK;
}

static int ex_supports(void *dev, lk_op op, const void *args)
{
    (void)dev;
    if (op != LK_OP_BINARY)
        return 0;
    const lk_binary_args *a = args;
    return (a->op == LK_BINARY_ADD || a->op == LK_BINARY_MUL) && a->a.dtype == LK_F32 &&
           a->b.dtype == LK_F32 && a->y.dtype == LK_F32;
}

static void ex_props(void *dev, lk_device_props *p)
{
    (void)dev;
    /* the core has zeroed *p */
    strcpy(p->name, "example:0");
    strcpy(p->description, "example module: f32 add and mul (examples/driver)");
    p->kind = LK_DEVICE_OTHER;
    p->host_memory = 1;
    p->numa_node = -1;
    p->priority = 0;
}

static const lk_device_iface ex_iface = {
    .struct_size = sizeof(lk_device_iface),
    .props = ex_props,
    .supports = ex_supports,
    .kernels = {.binary = ex_binary},
};

static char ex_state; /* the driver and its device need no state */

static lk_status ex_init(const lk_host *h, void **drv)
{
    host = h;
    host->debug("example driver: one device");
    *drv = &ex_state;
    return LK_OK;
}

static int ex_device_count(void *drv)
{
    (void)drv;
    return 1;
}

static lk_status ex_device_open(void *drv, int index, const lk_device_iface **iface, void **dev)
{
    (void)drv;
    if (index != 0) {
        host->set_error("example driver: no device %d", index);
        return LK_ERR_NO_DEVICE;
    }
    *iface = &ex_iface;
    *dev = &ex_state;
    return LK_OK;
}

static const lk_driver ex_driver = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = sizeof(lk_driver),
    .name = "example",
    .description = "example module (examples/driver/binary_f32.c)",
    .init = ex_init,
    .device_count = ex_device_count,
    .device_open = ex_device_open,
};

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);
LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void)
{
    return &ex_driver;
}
