/* What the files of tail's C row decoder (the extension cdc.rows._native) share: a column's action, the
 * growing output buffer, digits, and the value writers of _native_numbers.c, _native_types.c and _native_image.c.
 * One extension, six sources (pyproject.toml): _native.c (plans, lines, the module), _native_image.c (a row
 * image's values as JSON: UTF-8 text, binary, Python readers), _native_numbers.c (integers, DECIMAL, dates and
 * times), _native_types.c (FLOAT, DOUBLE, BIT, SET, text in other charsets) and cdc/_native_floats.c (FLOAT and
 * DOUBLE as orjson writes them, shared with the snapshot's reader) and _native_json.c (MySQL 8's binary JSON).
 */
#ifndef CDC_ROWS_NATIVE_H
#define CDC_ROWS_NATIVE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum action { A_PYTHON, A_INT, A_DECIMAL, A_TEXT, A_BASE64, A_DATETIME2, A_DATE, A_ENUM, A_YEAR, A_TIMESTAMP2, A_TIME2,
              A_FLOAT, A_DOUBLE, A_BIT, A_SET, A_CHARMAP, A_CODEC, A_JSON, A_COUNT };

/* Bytes per byte of a CHARMAP column's table: the JSON fragment's length (0: not in the charset), the fragment. */
#define CHARMAP_ENTRY 8

typedef struct {
    int action;
    long a, b;          /* INT: size, unsigned; DECIMAL: precision, scale; TEXT/BASE64: length size, pad;
                           DATETIME2: fraction bytes, scale; ENUM: size; TIMESTAMP2, TIME2: fraction bytes,
                           1 if the column shows fraction digits (its fsp > 0); BIT, SET: size;
                           CHARMAP, CODEC, JSON: length size */
    PyObject *extra;    /* PYTHON: the reader; ENUM, SET: tuple of label fragments (bytes); CHARMAP: the table
                           (256 * CHARMAP_ENTRY bytes); CODEC: the Python codec's name (str) */
} Column;

/* A growing output; with `bytes` set it is that bytes object itself (the result, returned without a copy). */
typedef struct { char *data; Py_ssize_t len, cap; PyObject *bytes; } Buf;

typedef struct { Py_ssize_t start, len; } Span; /* a value's JSON in the scratch buffer */

/* The buffer helpers are inline: they run for every value, and calls across files are not inlined. */
static inline int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    if (b->bytes) {
        if (_PyBytes_Resize(&b->bytes, cap) < 0) return -1; /* it freed the object and set b->bytes to NULL */
        b->data = PyBytes_AS_STRING(b->bytes);
        b->cap = cap;
        return 0;
    }
    char *data = PyMem_Realloc(b->data, cap);
    if (!data) { PyErr_NoMemory(); return -1; }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static inline uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static inline uint64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* "00".."99": two digits per division (digits_at is a tenth of tail's instructions otherwise). */
static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal digits of v, at least `width` (<= 20) of them (zero-padded), at w; returns the end (printf's %0*llu).
 * Written backwards straight into w once their count is known: no scratch copy (a memcpy call per value). */
static inline char *digits_at(char *w, uint64_t v, int width) {
    int count = 1;
    for (uint64_t bound = 10; count < 20 && v >= bound; bound *= 10) count++;
    char *end = w + (count > width ? count : width), *p = end;
    while (v >= 100) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) { p -= 2; memcpy(p, DIGIT_PAIRS + 2 * v, 2); }
    else *--p = (char)('0' + v);
    while (p > w) *--p = '0';
    return end;
}


typedef struct {
    Py_ssize_t ncols;
    Column *cols;
    PyObject *names;    /* tuple of (column index, b'"name":') in the image's key order (sorted, kept only) */
    PyObject *keys;     /* the same for the key's columns */
    Py_ssize_t *name_index, *key_index; /* the column indexes of names and keys, read once by compile() */
    PyObject *dumps;
} Plan;


/* _native_numbers.c: fixed-width values at p (the caller checked the body holds them), as JSON. */
int put_int(Buf *out, const unsigned char *p, long size, long is_unsigned);
Py_ssize_t decimal_size(long precision, long scale);
int put_decimal(Buf *out, const unsigned char *p, long precision, long scale);
int put_datetime2(Buf *out, const unsigned char *p, long fsize, long scale);
int put_date(Buf *out, const unsigned char *p);
int put_year(Buf *out, const unsigned char *p);
int put_timestamp2(Buf *out, const unsigned char *p, long fsize, long scale);
int put_time2(Buf *out, const unsigned char *p, long fsize, long scale);

/* _native_types.c: the same for FLOAT, DOUBLE, BIT and SET; text of n bytes at s in another charset. */
int put_float(Buf *out, const unsigned char *p);
int put_double(Buf *out, const unsigned char *p);
int put_bit(Buf *out, const unsigned char *p, long size);
int put_set(Buf *out, const unsigned char *p, long size, PyObject *labels);
int put_charmap(Buf *out, const unsigned char *s, Py_ssize_t n, PyObject *table);
int put_codec(Buf *out, const unsigned char *s, Py_ssize_t n, PyObject *codec);

/* _native_image.c */
int put_text(Buf *out, const unsigned char *s, Py_ssize_t n);
void base64_init(void);
int read_image(const Plan *plan, PyObject *body, Py_ssize_t *pos, Buf *scratch, Span *spans);

/* _native_json.c: MySQL 8's binary JSON document (n > 0 bytes, the caller checked the body holds them). */
int put_json(Buf *out, const unsigned char *p, Py_ssize_t n, PyObject *dumps);

#endif
