/* Lockstep reference backend: the built-in "ref" driver.
 *
 * One device, host memory, no queues of its own (the core runs its ops to
 * completion inside each call), every kernel the reference one. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <string.h>

#include "backends/host.h"
#include "backends/ref/ref.h"
#include "core/builtin.h"

/* The kernels of the driver ABI take a queue; the reference needs none. */
#define LK_REF_ADAPT(op, type)                                                      \
    static lk_status lk_ref_q_##op(void *queue, const type *a)                      \
    {                                                                               \
        (void)queue;                                                                \
        return lk_ref_##op(a);                                                      \
    }

LK_REF_ADAPT(gemm, lk_gemm_args)
LK_REF_ADAPT(reduce, lk_reduce_args)
LK_REF_ADAPT(rmsnorm, lk_norm_args)
LK_REF_ADAPT(layernorm, lk_norm_args)
LK_REF_ADAPT(softmax, lk_softmax_args)
LK_REF_ADAPT(log_softmax, lk_softmax_args)
LK_REF_ADAPT(unary, lk_unary_args)
LK_REF_ADAPT(binary, lk_binary_args)
LK_REF_ADAPT(quantize_act, lk_quant_args)
LK_REF_ADAPT(quantize_ternary, lk_quant_args)
LK_REF_ADAPT(ternary_pack, lk_pack_args)
LK_REF_ADAPT(ternary_unpack, lk_pack_args)
LK_REF_ADAPT(ternary_gemm, lk_qgemm_args)
LK_REF_ADAPT(int8_gemm, lk_qgemm_args)
LK_REF_ADAPT(gemm_tc, lk_gemm_args)
LK_REF_ADAPT(rope, lk_rope_args)
LK_REF_ADAPT(attention, lk_attention_args)
LK_REF_ADAPT(embedding, lk_embedding_args)
LK_REF_ADAPT(rmsnorm_quantize, lk_norm_quant_args)
LK_REF_ADAPT(set_rows, lk_set_rows_args)
LK_REF_ADAPT(glu, lk_glu_args)
LK_REF_ADAPT(attention_paged, lk_attention_paged_args)
LK_REF_ADAPT(kv_write_paged, lk_kv_write_paged_args)
LK_REF_ADAPT(unary_backward, lk_unary_backward_args)
LK_REF_ADAPT(softmax_backward, lk_softmax_backward_args)
LK_REF_ADAPT(norm_backward, lk_norm_backward_args)
LK_REF_ADAPT(embedding_backward, lk_embedding_backward_args)
LK_REF_ADAPT(optim_step, lk_optim_args)

static const lk_device_iface lk_ref_iface;

/* lk_bitnet_decode: the host's composition on the reference kernels (host
 * memory: the cache rows are computed there), as a module would run it. */
static lk_status lk_ref_q_bitnet_decode(void *queue, const lk_bitnet_args *a)
{
    return lk_backend_host()->bitnet_compose(&lk_ref_iface.kernels, queue, a, 0);
}

static void lk_ref_props(void *dev, lk_device_props *p)
{
    (void)dev;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "ref");
    snprintf(p->description, sizeof p->description,
             "portable reference C, one thread (the executable contract)");
    snprintf(p->driver, sizeof p->driver, "ref");
    p->kind = LK_DEVICE_REFERENCE;
    p->host_memory = 1;
    p->emulated = 0;
    p->numa_node = -1;
    p->priority = 0;
    p->max_threads = 1;
}

static const lk_device_iface lk_ref_iface = {
    .struct_size = sizeof(lk_device_iface),
    .props = lk_ref_props,
    .kernels = {
        .gemm = lk_ref_q_gemm,
        .reduce = lk_ref_q_reduce,
        .rmsnorm = lk_ref_q_rmsnorm,
        .layernorm = lk_ref_q_layernorm,
        .softmax = lk_ref_q_softmax,
        .log_softmax = lk_ref_q_log_softmax,
        .unary = lk_ref_q_unary,
        .binary = lk_ref_q_binary,
        .quantize_act = lk_ref_q_quantize_act,
        .quantize_ternary = lk_ref_q_quantize_ternary,
        .ternary_pack = lk_ref_q_ternary_pack,
        .ternary_unpack = lk_ref_q_ternary_unpack,
        .ternary_gemm = lk_ref_q_ternary_gemm,
        .int8_gemm = lk_ref_q_int8_gemm,
        .gemm_tc = lk_ref_q_gemm_tc,
        .rope = lk_ref_q_rope,
        .attention = lk_ref_q_attention,
        .embedding = lk_ref_q_embedding,
        .rmsnorm_quantize = lk_ref_q_rmsnorm_quantize,
        .set_rows = lk_ref_q_set_rows,
        .glu = lk_ref_q_glu,
        .bitnet_decode = lk_ref_q_bitnet_decode,
        .unary_backward = lk_ref_q_unary_backward,
        .softmax_backward = lk_ref_q_softmax_backward,
        .norm_backward = lk_ref_q_norm_backward,
        .embedding_backward = lk_ref_q_embedding_backward,
        .optim_step = lk_ref_q_optim_step,
    },
    .attention_paged = lk_ref_q_attention_paged,
    .kv_write_paged = lk_ref_q_kv_write_paged,
};

/* The driver and its one device have no state: any non-NULL token will do. */
static char lk_ref_token;

static lk_status lk_ref_init(const lk_host *host, void **drv)
{
    lk_backend_host_set(host); /* the kernels' error messages */
    *drv = &lk_ref_token;
    return LK_OK;
}

static int lk_ref_device_count(void *drv)
{
    (void)drv;
    return 1;
}

static lk_status lk_ref_device_open(void *drv, int index, const lk_device_iface **iface,
                                    void **dev)
{
    (void)drv;
    if (index != 0)
        return LK_ERR_NO_DEVICE;
    *iface = &lk_ref_iface;
    *dev = &lk_ref_token;
    return LK_OK;
}

static const lk_driver lk_ref_drv = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = sizeof(lk_driver),
    .name = "ref",
    .description = "portable reference C (docs/numerics.md, literally)",
    .init = lk_ref_init,
    .fini = NULL,
    .device_count = lk_ref_device_count,
    .device_open = lk_ref_device_open,
    .device_close = NULL,
};

const lk_driver *lk_ref_driver_entry(void)
{
    return &lk_ref_drv;
}
