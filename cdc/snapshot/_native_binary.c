/* Binary-protocol rows as text-protocol rows: see _native_binary.h and cdc/snapshot/binary.py (the reference).
 *
 * Integers, DATE/DATETIME/TIMESTAMP and TIME are printed as the server prints them; DOUBLE and FLOAT as
 * Python's repr, which reads back as the same double (every reader of a snapshot line takes a DOUBLE's text
 * through float()), or, asked with `json` for a column without a rule, as orjson's number (json_double): the
 * reader then copies it into the line as it stands; every other type is sent as text by both protocols and is
 * copied.
 */
#include "_native_binary.h"

#include "../_native_floats.h"

#include <stdint.h>
#include <string.h>

enum {
    T_DECIMAL = 0, T_TINY = 1, T_SHORT = 2, T_LONG = 3, T_FLOAT = 4, T_DOUBLE = 5, T_NULL = 6, T_TIMESTAMP = 7,
    T_LONGLONG = 8, T_INT24 = 9, T_DATE = 10, T_TIME = 11, T_DATETIME = 12, T_YEAR = 13, T_VARCHAR = 15,
    T_BIT = 16, T_JSON = 245, T_GEOMETRY = 255,
};
#define MAX_ZEROFILL 255 /* a display width is at most 255 */

static int integer_width(int code)
{
    switch (code) {
    case T_TINY:
        return 1;
    case T_SHORT:
    case T_YEAR:
        return 2;
    case T_INT24:
    case T_LONG:
        return 4;
    case T_LONGLONG:
        return 8;
    default:
        return 0;
    }
}

int binary_type_known(int code, int decimals)
{
    if (code == T_DATETIME || code == T_TIMESTAMP || code == T_TIME)
        return decimals >= 0 && decimals <= 6;
    return code <= T_YEAR || code == T_VARCHAR || code == T_BIT || (code >= T_JSON && code <= T_GEOMETRY);
}

static int bad(const char *why)
{
    PyErr_SetString(PyExc_ValueError, why);
    return -1;
}

static int reserve(TextRow *t, Py_ssize_t more)
{
    if (t->len + more <= t->cap)
        return 0;
    Py_ssize_t cap = t->cap * 2 > t->len + more ? t->cap * 2 : t->len + more + 256;
    unsigned char *data = PyMem_Realloc(t->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -2;
    }
    t->data = data;
    t->cap = cap;
    return 0;
}

/* A length-encoded string (length prefix, then the bytes). */
static int put(TextRow *t, const void *s, Py_ssize_t n)
{
    if (reserve(t, n + 9) < 0)
        return -2;
    unsigned char *w = t->data + t->len;
    uint64_t size = (uint64_t)n;
    if (size < 0xFB)
        *w++ = (unsigned char)size;
    else {
        int width = size < (1u << 16) ? 2 : (size < (1u << 24) ? 3 : 8);
        *w++ = width == 2 ? 0xFC : (width == 3 ? 0xFD : 0xFE);
        for (int k = 0; k < width; k++)
            *w++ = (unsigned char)(size >> (8 * k));
    }
    memcpy(w, s, n);
    t->len = (w - t->data) + n;
    return 0;
}

static uint64_t little(const unsigned char *b, int width)
{
    uint64_t v = 0;
    for (int k = width - 1; k >= 0; k--)
        v = v << 8 | b[k];
    return v;
}

/* v's decimal digits at w, zero-padded to at least `width` (printf's %0*llu; snprintf cost more than the rest
 * of a row). The end of what was written. */
static char *digits(char *w, uint64_t v, int width)
{
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (; width > k; width--)
        *w++ = '0';
    while (k)
        *w++ = tmp[--k];
    return w;
}

static int put_integer(TextRow *t, const unsigned char *b, int width, const WireType *w)
{
    char text[MAX_ZEROFILL + 32], *e = text;
    uint64_t raw = little(b, width);
    int pad = w->zerofill > MAX_ZEROFILL ? MAX_ZEROFILL : w->zerofill;
    if (!w->is_unsigned) {
        int shift = 64 - 8 * width; /* sign-extend the width's top bit */
        int64_t value = (int64_t)(raw << shift) >> shift;
        if (value < 0) {
            *e++ = '-';
            raw = 0 - (uint64_t)value;
            pad = pad > 0 ? pad - 1 : 0; /* %0*lld counts the sign in the width */
        }
    }
    e = digits(e, raw, pad);
    return put(t, text, e - text);
}

static int put_double(TextRow *t, double x)
{
    char *text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* repr's text */
    if (text == NULL)
        return -2;
    int status = put(t, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return status;
}

/* The fraction as the server prints it: exactly `decimals` digits of the microseconds (none for 0). */
static char *fraction(char *w, uint32_t micro, int decimals)
{
    if (decimals == 0)
        return w;
    char all[24];
    char *e = digits(all, micro, 6);
    *w++ = '.';
    int n = (int)(e - all) < decimals ? (int)(e - all) : decimals;
    memcpy(w, all, n);
    return w + n;
}

static int put_temporal(TextRow *t, const unsigned char *f, int size, const WireType *w)
{
    char text[96], *e = text;
    if (w->decimals > 6)
        return bad("a temporal with more than 6 fraction digits");
    if (w->code == T_TIME) {
        if (size != 0 && size != 8 && size != 12)
            return bad("a binary TIME is 0, 8 or 12 bytes");
        unsigned char z[12] = {0};
        memcpy(z, f, size);
        if (z[0])
            *e++ = '-';
        e = digits(e, little(z + 1, 4) * 24 + z[5], 2); /* days * 24 + hours */
        *e++ = ':';
        e = digits(e, z[6], 2);
        *e++ = ':';
        e = digits(e, z[7], 2);
        e = fraction(e, (uint32_t)little(z + 8, 4), w->decimals);
        return put(t, text, e - text);
    }
    if (size != 0 && size != 4 && size != 7 && size != 11)
        return bad("a binary date is 0, 4, 7 or 11 bytes");
    unsigned char z[11] = {0};
    memcpy(z, f, size);
    e = digits(e, little(z, 2), 4);
    *e++ = '-';
    e = digits(e, z[2], 2);
    *e++ = '-';
    e = digits(e, z[3], 2);
    if (w->code != T_DATE) {
        *e++ = ' ';
        e = digits(e, z[4], 2);
        *e++ = ':';
        e = digits(e, z[5], 2);
        *e++ = ':';
        e = digits(e, z[6], 2);
        e = fraction(e, (uint32_t)little(z + 7, 4), w->decimals);
    }
    return put(t, text, e - text);
}

/* A length-encoded value at *p (strings, DECIMAL, BLOB, ENUM, SET, BIT, JSON, GEOMETRY), copied as it is. */
static int put_copy(TextRow *t, const unsigned char *b, Py_ssize_t *p, Py_ssize_t n)
{
    Py_ssize_t at = *p;
    unsigned char c = b[at];
    int width = c < 0xFB ? 0 : (c == 0xFC ? 2 : (c == 0xFD ? 3 : (c == 0xFE ? 8 : -1)));
    if (width < 0)
        return bad("a length prefix not valid in a binary row");
    if (n - at - 1 < width)
        return bad("a binary row cut short");
    uint64_t size = width ? little(b + at + 1, width) : c;
    at += 1 + width;
    if (size > (uint64_t)(n - at))
        return bad("a binary row cut short");
    *p = at + (Py_ssize_t)size;
    return put(t, b + at, (Py_ssize_t)size);
}

/* A DOUBLE as orjson writes it, for a column read as it stands; 1 where json_double is not sure. */
static int put_json_double(TextRow *t, double x, int exponents)
{
    char text[JSON_DOUBLE_SIZE];
    Py_ssize_t len = json_double(x, text, exponents);
    return len < 0 ? 1 : put(t, text, len);
}

static int put_value(TextRow *t, const unsigned char *b, Py_ssize_t *p, Py_ssize_t n, const WireType *w, int json)
{
    int width = integer_width(w->code);
    Py_ssize_t at = *p;
    if (at >= n)
        return bad("a binary row cut short");
    if (width) {
        if (n - at < width)
            return bad("a binary row cut short");
        *p = at + width;
        return put_integer(t, b + at, width, w);
    }
    if (w->code == T_DOUBLE || w->code == T_FLOAT) {
        int size = w->code == T_DOUBLE ? 8 : 4;
        if (n - at < size)
            return bad("a binary row cut short");
        *p = at + size;
        if (size == 8) {
            double d;
            memcpy(&d, b + at, 8);
            return json && w->json ? put_json_double(t, d, json == 2) : put_double(t, d);
        }
        float f;
        memcpy(&f, b + at, 4);
        return put_double(t, (double)f);
    }
    if (w->code == T_DATE || w->code == T_DATETIME || w->code == T_TIMESTAMP || w->code == T_TIME) {
        int size = b[at];
        if (n - at - 1 < size)
            return bad("a binary row cut short");
        *p = at + 1 + size;
        return put_temporal(t, b + at + 1, size, w);
    }
    return put_copy(t, b, p, n);
}

int binary_to_text(const unsigned char *b, Py_ssize_t n, const WireType *types, Py_ssize_t ncols, int json,
                   TextRow *out)
{
    out->len = 0;
    if (n < 1 || b[0] != 0)
        return bad("a binary row starts with 0x00");
    Py_ssize_t bitmap = (ncols + 9) / 8; /* the NULL bitmap starts at bit 2 */
    if (n < 1 + bitmap)
        return bad("a binary row shorter than its NULL bitmap");
    const unsigned char *nulls = b + 1;
    Py_ssize_t p = 1 + bitmap;
    for (Py_ssize_t i = 0; i < ncols; i++) {
        int status;
        if (nulls[(i + 2) / 8] >> ((i + 2) % 8) & 1) {
            status = reserve(out, 1);
            if (status == 0)
                out->data[out->len++] = 0xFB;
        } else
            status = put_value(out, b, &p, n, &types[i], json);
        if (status != 0)
            return status;
    }
    if (p != n)
        return bad("a binary row longer than its values");
    return 0;
}
