/* BitNet example: token ids back to text (vocab.h). */
#include <string.h>

#include "vocab.h"

/* One UTF-8 code point at s (len bytes left); 0 on a malformed sequence. */
static int utf8(const unsigned char *s, uint64_t len, uint32_t *cp)
{
    int n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (n == 0 || (uint64_t)n > len)
        return 0;
    *cp = n == 1 ? s[0] : s[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        *cp = *cp << 6 | (s[i] & 0x3f);
    }
    return n;
}

/* GPT-2's bytes_to_unicode, inverted: the printable bytes stand for
 * themselves, the other 68 are U+0100 + their rank among those. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff))
        return (int)cp;
    if (cp < 0x100 || cp >= 0x100 + 68)
        return -1;
    int rank = (int)(cp - 0x100);
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        if (!printable && rank-- == 0)
            return b;
    }
    return -1;
}

static size_t put(char *out, size_t n, size_t at, const void *p, size_t k)
{
    if (n == 0)
        return at;
    if (at + k > n - 1)
        k = at < n - 1 ? n - 1 - at : 0;
    memcpy(out + at, p, k);
    out[at + k] = 0;
    return at + k;
}

int bn_detok(const lkg_file *f, int64_t id, char *out, size_t n)
{
    const lkg_kv *kv = lkg_find_kv(f, "tokenizer.ggml.tokens");
    char model[32] = "";
    lkg_str tok;
    if (n)
        out[0] = 0;
    if (!kv || id < 0 || lkg_array_str(&kv->value, (uint64_t)id, &tok))
        return -1;
    lkg_get_str(f, "tokenizer.ggml.model", model, sizeof model, NULL, 0);
    const unsigned char *s = (const unsigned char *)tok.s;
    size_t at = 0;
    int spm = !strcmp(model, "llama");
    for (uint64_t i = 0; i < tok.len;) {
        uint32_t cp;
        int k = utf8(s + i, tok.len - i, &cp);
        if (k == 0) { /* not UTF-8: pass the byte through */
            at = put(out, n, at, s + i, 1);
            i++;
            continue;
        }
        if (spm && cp == 0x2581) {
            at = put(out, n, at, " ", 1);
        } else if (spm && k == 1 && cp == '<' && tok.len - i == 6 && s[i + 1] == '0' &&
                   s[i + 2] == 'x' && s[i + 5] == '>') {
            unsigned v = 0;
            for (int j = 3; j < 5; j++) {
                unsigned char c = s[i + (uint64_t)j];
                v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
            }
            unsigned char byte = (unsigned char)v;
            at = put(out, n, at, &byte, 1);
            k = 6;
        } else if (!spm && gpt2_byte(cp) >= 0) {
            unsigned char byte = (unsigned char)gpt2_byte(cp);
            at = put(out, n, at, &byte, 1);
        } else {
            at = put(out, n, at, s + i, (size_t)k); /* special tokens, other text */
        }
        i += (uint64_t)k;
    }
    return (int)at;
}
