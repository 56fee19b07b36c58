/* Tail's C row decoder (see _native.c): FLOAT, DOUBLE, BIT, SET and text in charsets other than UTF-8, as the
 * Python fast path's readers and cdc.values give them and orjson writes them. The caller checked that the
 * body holds the value; anything these are not sure of raises ValueError (the Python path decides).
 */
#include "_native.h"
#include "../_native_floats.h"
#include <math.h>

static int not_exact(const char *what) {
    PyErr_Format(PyExc_ValueError, "%s: left to the Python reader", what);
    return -1;
}

/* orjson.dumps(x): nan and the infinities (which only hostile bytes hold: MySQL stores none) are null. */
static int put_json_double(Buf *out, double x) {
    if (!isfinite(x)) return buf_put(out, "null", 4);
    if (buf_reserve(out, JSON_DOUBLE_SIZE) < 0) return -1;
    Py_ssize_t n = json_double(x, out->data + out->len, 1);
    if (n < 0) return not_exact("a DOUBLE's digits");
    out->len += n;
    return 0;
}

/* FLOAT: struct '<f', then cdc.values.shortest_float32 (which leaves nan and the infinities as they are). */
int put_float(Buf *out, const unsigned char *p) {
    uint32_t bits = (uint32_t)le(p, 4);
    float f;
    memcpy(&f, &bits, sizeof f);
    double shortest = f;
    if (isfinite(shortest) && shortest_float32(f, &shortest) < 0) return not_exact("a FLOAT's shortest digits");
    return put_json_double(out, shortest);
}

/* DOUBLE: struct '<d', the value itself. */
int put_double(Buf *out, const unsigned char *p) {
    uint64_t bits = le(p, 8);
    double x;
    memcpy(&x, &bits, sizeof x);
    return put_json_double(out, x);
}

/* BIT(n): its (n + 7) / 8 big-endian bytes as an unsigned integer (cdc.values' int.from_bytes(v, "big")). */
int put_bit(Buf *out, const unsigned char *p, long size) {
    if (buf_reserve(out, 24) < 0) return -1;
    out->len = digits_at(out->data + out->len, be(p, (int)size), 1) - out->data;
    return 0;
}

/* SET: the labels of the mask's bits in definition order, a JSON list (labels: each label's orjson.dumps). */
int put_set(Buf *out, const unsigned char *p, long size, PyObject *labels) {
    uint64_t mask = le(p, (int)size);
    Py_ssize_t count = PyTuple_GET_SIZE(labels);
    if (buf_put(out, "[", 1) < 0) return -1;
    int first = 1;
    for (Py_ssize_t i = 0; i < count && i < 64; i++) {
        if (!(mask >> i & 1)) continue;
        PyObject *label = PyTuple_GET_ITEM(labels, i);
        if ((!first && buf_put(out, ",", 1) < 0) || buf_put(out, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label)) < 0)
            return -1;
        first = 0;
    }
    return buf_put(out, "]", 1);
}

/* Text in a single-byte charset: each byte's JSON fragment from `table` (256 entries of CHARMAP_ENTRY bytes:
 * the fragment's length, 0 for a byte the codec refuses, then the fragment), quoted. */
int put_charmap(Buf *out, const unsigned char *s, Py_ssize_t n, PyObject *table) {
    const unsigned char *entries = (const unsigned char *)PyBytes_AS_STRING(table);
    if (buf_reserve(out, (CHARMAP_ENTRY - 1) * n + 2) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *entry = entries + CHARMAP_ENTRY * s[i];
        if (!entry[0]) {
            PyErr_Format(PyExc_ValueError, "byte 0x%02x at %zd of a text value is not in its charset", s[i], i);
            return -1;
        }
        memcpy(w, entry + 1, CHARMAP_ENTRY - 1); /* room: CHARMAP_ENTRY - 1 reserved per byte */
        w += entry[0];
    }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* Text in any other charset: decoded by CPython's codec (strict, as bytes.decode), then written as UTF-8 text. */
int put_codec(Buf *out, const unsigned char *s, Py_ssize_t n, PyObject *codec) {
    const char *name = PyUnicode_AsUTF8(codec);
    if (!name) return -1;
    PyObject *text = PyUnicode_Decode((const char *)s, n, name, "strict");
    if (!text) return -1;
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size); /* lone surrogates raise UnicodeEncodeError */
    int rc = utf8 ? put_text(out, (const unsigned char *)utf8, size) : -1;
    Py_DECREF(text);
    return rc;
}
