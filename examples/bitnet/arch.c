/* BitNet example: the architecture table (arch.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lockstep.h>

#include "arch.h"

/* Sources: llama.cpp's llama_model_rope_type lists LLM_ARCH_BITNET with the
 * architectures whose RoPE pairs dimension i with i + n_rot / 2 (NEOX), and
 * its bitnet graph gates the FFN with SiLU and always uses token_embd as
 * the LM head; bitnet.cpp's llama.cpp fork lists "bitnet-b1.58" and
 * "bitnet-25" with NEOX too and runs them through build_bitnet_158, which
 * gates with relu(x)^2 (HF modeling_bitnet.py's relu2) and takes
 * output.weight when the file has one.  Every one has the four RMSNorms:
 * attn_norm, attn_sub_norm (before the output projection), ffn_norm and
 * ffn_sub_norm (before the down projection). */
static const bn_arch table[] = {
    {"bitnet", "llama.cpp (convert_hf_to_gguf.py BitnetModel)", LK_ROPE_NEOX, LK_UNARY_SILU, 1},
    {"bitnet-b1.58", "bitnet.cpp (BitNet-b1.58-2B-4T GGUF), lockstep demo --write-gguf",
     LK_ROPE_NEOX, LK_UNARY_RELU2, 0},
    {"bitnet-25", "bitnet.cpp", LK_ROPE_NEOX, LK_UNARY_RELU2, 0},
};

int bn_arch_count(void)
{
    return (int)(sizeof table / sizeof table[0]);
}

const bn_arch *bn_arch_at(int i)
{
    return i >= 0 && i < bn_arch_count() ? &table[i] : NULL;
}

const bn_arch *bn_arch_find(const char *name)
{
    for (int i = 0; i < bn_arch_count(); i++)
        if (!strcmp(table[i].name, name))
            return &table[i];
    return NULL;
}

const char *bn_arch_names(void)
{
    return "bitnet, bitnet-b1.58, bitnet-25";
}

static int has_suffix(lkg_str s, const char *suf)
{
    size_t n = strlen(suf);
    return s.len >= n && !memcmp(s.s + s.len - n, suf, n);
}

int bn_arch_check(const lkg_file *f, const bn_arch *a, char *err, size_t errlen)
{
    char key[160], type[32] = "";
    snprintf(key, sizeof key, "%s.rope.scaling.type", a->name);
    if (lkg_find_kv(f, key)) {
        if (lkg_get_str(f, key, type, sizeof type, err, errlen))
            return -1;
        if (strcmp(type, "none") && strcmp(type, "linear"))
            return lkg_fail(err, errlen, "metadata '%s' = '%s': only 'none' and 'linear' (by 1) "
                            "RoPE scaling is run", key, type);
    }
    snprintf(key, sizeof key, "%s.rope.scaling.factor", a->name);
    if (lkg_find_kv(f, key) && strcmp(type, "none")) {
        float fac;
        if (lkg_get_f32(f, key, &fac, err, errlen))
            return -1;
        /* llama.cpp reads a factor of 0 as "no scaling" too */
        if (fac != 1.0f && fac != 0.0f)
            return lkg_fail(err, errlen, "metadata '%s' = %g: RoPE scaling is not run (only a "
                            "factor of 1)", key, (double)fac);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const lkg_tensor *t = &f->tensors[i];
        if (has_suffix(t->name, ".scale"))
            return lkg_fail(err, errlen, "tensor '%.*s': separate per-tensor weight scales are "
                            "not read; the scale must be in the weights (TQ1_0, TQ2_0, I2_S "
                            "or {-s, 0, s} values)", (int)(t->name.len > 64 ? 64 : t->name.len),
                            t->name.s);
    }
    if (a->tied_head && lkg_find_tensor(f, "output.weight"))
        return lkg_fail(err, errlen, "architecture '%s' ties the LM head to token_embd.weight, "
                        "but the file has output.weight (llama.cpp refuses such a file too)",
                        a->name);
    return 0;
}
