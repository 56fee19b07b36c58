/* Tail's row decoder in C: a full-image rows-event body -> the finished change lines of its rows (issue 28).
 *
 * It does what cdc.rows.compiled's reader and cdc.capture.rowblock.rows_block do together in Python,
 * following a column program cdc.rows.native builds once per table map: per column one action (an
 * integer, DECIMAL as its exact text, DATETIME2, TIMESTAMP2, TIME2 and DATE as text, YEAR, UTF-8 text
 * validated and escaped as orjson escapes it, binary in base64, an ENUM's label), or a call of the
 * column's Python reader and orjson.dumps of its value for every other type (FLOAT, DOUBLE, SET, BIT,
 * GEOMETRY, other charsets, hashed columns): the output is the Python fast path's, byte for byte.
 *
 * Exactness rule: on anything this code is not sure of (bytes past the end of the body, invalid UTF-8,
 * a DECIMAL group out of its range, a Python reader that raised) it raises, and the caller decodes the
 * event through the Python path (the oracle), which gives the lines or names the column and row.
 * It never reads outside the body: every read is checked against its end first.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Raised when this file changes what the Python side passes (cdc/rows/native.py). */
#define ABI_VERSION 3

enum action { A_PYTHON, A_INT, A_DECIMAL, A_TEXT, A_BASE64, A_DATETIME2, A_DATE, A_ENUM, A_YEAR, A_TIMESTAMP2, A_TIME2,
              A_COUNT };

typedef struct {
    int action;
    long a, b;          /* INT: size, unsigned; DECIMAL: precision, scale; TEXT/BASE64: length size, pad;
                           DATETIME2: fraction bytes, scale; ENUM: size; TIMESTAMP2, TIME2: fraction bytes,
                           1 if the column shows fraction digits (its fsp > 0) */
    PyObject *extra;    /* PYTHON: the reader; ENUM: tuple of label fragments (bytes) */
} Column;

/* A growing output; with `bytes` set it is that bytes object itself (the result, returned without a copy). */
typedef struct { char *data; Py_ssize_t len, cap; PyObject *bytes; } Buf;

typedef struct { Py_ssize_t start, len; } Span; /* a value's JSON in the scratch buffer */

static int buf_reserve(Buf *b, Py_ssize_t more) {
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

static int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

/* Start `b` as a bytes object of `cap` bytes, to be cut to its length by buf_result. */
static int buf_start_bytes(Buf *b, Py_ssize_t cap) {
    b->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (!b->bytes) return -1;
    b->data = PyBytes_AS_STRING(b->bytes);
    b->len = 0;
    b->cap = cap;
    return 0;
}

/* The bytes object of a buf_start_bytes buffer, cut to what was written (a new reference), or NULL. */
static PyObject *buf_result(Buf *b) {
    PyObject *bytes = b->bytes;
    b->bytes = NULL;
    if (bytes && _PyBytes_Resize(&bytes, b->len) < 0) return NULL;
    return bytes;
}

static int truncated(Py_ssize_t pos, Py_ssize_t end) {
    PyErr_Format(PyExc_ValueError, "rows event truncated: a value runs past byte %zd of %zd", pos, end);
    return -1;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* "00".."99": two digits per division (digits_at is a tenth of tail's instructions otherwise). */
static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal digits of v, at least `width` (<= 20) of them (zero-padded), at w; returns the end (printf's %0*llu). */
static char *digits_at(char *w, uint64_t v, int width) {
    char tmp[24];
    int n = 24;
    while (v >= 100) {
        unsigned pair = (unsigned)(v % 100);
        v /= 100;
        n -= 2;
        memcpy(tmp + n, DIGIT_PAIRS + 2 * pair, 2);
    }
    if (v >= 10) { n -= 2; memcpy(tmp + n, DIGIT_PAIRS + 2 * v, 2); }
    else tmp[--n] = (char)('0' + v);
    while (24 - n < width) tmp[--n] = '0';
    memcpy(w, tmp + n, 24 - n);
    return w + 24 - n;
}

static int put_int(Buf *out, const unsigned char *p, long size, long is_unsigned) {
    if (buf_reserve(out, 24) < 0) return -1;
    uint64_t raw = le(p, (int)size);
    char *w = out->data + out->len;
    if (!is_unsigned) {
        int shift = 64 - 8 * (int)size;
        int64_t v = (int64_t)(raw << shift) >> shift;
        if (v < 0) { *w++ = '-'; raw = (uint64_t)0 - (uint64_t)v; }
        else raw = (uint64_t)v;
    }
    out->len = digits_at(w, raw, 1) - out->data;
    return 0;
}

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const uint32_t POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

static Py_ssize_t decimal_size(long precision, long scale) {
    long intg = precision - scale;
    return DIG2BYTES[intg % 9] + 4 * (intg / 9) + 4 * (scale / 9) + DIG2BYTES[scale % 9];
}

/* One group of `digits` digits in `width` big-endian bytes, its bits inverted for a negative value. */
static int decimal_group(const unsigned char *p, int width, int digits, uint8_t flip, int first, char *text) {
    uint64_t v = 0;
    for (int i = 0; i < width; i++) {
        uint8_t byte = p[i] ^ flip;
        if (first && i == 0) byte ^= 0x80; /* the sign bit reads as 0 either way */
        v = v << 8 | byte;
    }
    if (v >= POW10[digits]) return -1; /* not a valid group: Python's arithmetic would differ, let it decide */
    digits_at(text, v, digits);
    return 0;
}

/* DECIMAL as cdc.rows.decimals.decimal_text_reader writes it, quoted. */
static int put_decimal(Buf *out, const unsigned char *p, long precision, long scale) {
    long intg = precision - scale;
    uint8_t flip = (p[0] & 0x80) ? 0 : 0xFF;
    char digits[96], group[12];
    Py_ssize_t n = 0;
    int first = 1;
    if (intg % 9) {
        if (decimal_group(p, DIG2BYTES[intg % 9], intg % 9, flip, first, group) < 0) goto bad;
        memcpy(digits + n, group, intg % 9); n += intg % 9; p += DIG2BYTES[intg % 9]; first = 0;
    }
    for (long i = 0; i < intg / 9; i++) {
        if (decimal_group(p, 4, 9, flip, first, group) < 0) goto bad;
        memcpy(digits + n, group, 9); n += 9; p += 4; first = 0;
    }
    Py_ssize_t lead = 0;
    while (lead < n - 1 && digits[lead] == '0') lead++;
    if (buf_reserve(out, 100) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    if (flip) *w++ = '-';
    if (n == 0) *w++ = '0';
    memcpy(w, digits + lead, n - lead); w += n - lead;
    if (scale) {
        *w++ = '.';
        for (long i = 0; i < scale / 9; i++) {
            if (decimal_group(p, 4, 9, flip, first, group) < 0) goto bad;
            memcpy(w, group, 9); w += 9; p += 4; first = 0;
        }
        if (scale % 9) {
            if (decimal_group(p, DIG2BYTES[scale % 9], scale % 9, flip, first, group) < 0) goto bad;
            memcpy(w, group, scale % 9); w += scale % 9;
        }
    }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "DECIMAL group out of range");
    return -1;
}

static int put_datetime2(Buf *out, const unsigned char *p, long fsize, long scale) {
    if (buf_reserve(out, 48) < 0) return -1;
    uint64_t data = be(p, 5);
    unsigned ym = (unsigned)((data >> 22) & 0x1FFFF);
    char *w = out->data + out->len;
    *w++ = '"';
    w = digits_at(w, ym / 13, 4); *w++ = '-';
    w = digits_at(w, ym % 13, 2); *w++ = '-';
    w = digits_at(w, (data >> 17) & 0x1F, 2); *w++ = ' ';
    w = digits_at(w, (data >> 12) & 0x1F, 2); *w++ = ':';
    w = digits_at(w, (data >> 6) & 0x3F, 2); *w++ = ':';
    w = digits_at(w, data & 0x3F, 2);
    if (fsize) { *w++ = '.'; w = digits_at(w, be(p + 5, (int)fsize) * (uint64_t)scale, 6); }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

static int put_date(Buf *out, const unsigned char *p) {
    if (buf_reserve(out, 24) < 0) return -1;
    unsigned v = (unsigned)le(p, 3);
    char *w = out->data + out->len;
    *w++ = '"';
    w = digits_at(w, v >> 9, 4); *w++ = '-';
    w = digits_at(w, (v >> 5) & 0xF, 2); *w++ = '-';
    w = digits_at(w, v & 0x1F, 2);
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* YEAR as cdc.rows.temporal.read_year + cdc.values: 0 stays 0, else 1900 + the byte. */
static int put_year(Buf *out, const unsigned char *p) {
    if (buf_reserve(out, 8) < 0) return -1;
    out->len = digits_at(out->data + out->len, p[0] ? 1900u + p[0] : 0, 1) - out->data;
    return 0;
}

/* TIMESTAMP2 as timestamp2_reader + cdc.values: UTC 'YYYY-MM-DDThh:mm:ss[.ffffff]Z', zero as 0000-00-00T00:00:00. */
static int put_timestamp2(Buf *out, const unsigned char *p, long fsize, long scale) {
    static const uint64_t UNIT[4] = {0, 10000, 100, 1}; /* microseconds per unit of 1-3 fraction bytes */
    uint64_t seconds = be(p, 4), micro = fsize ? be(p + 4, (int)fsize) * UNIT[fsize] : 0;
    if (micro > 999999) {
        PyErr_SetString(PyExc_ValueError, "TIMESTAMP fraction out of range");
        return -1;
    }
    if (buf_reserve(out, 40) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    if (seconds == 0 && micro == 0) {
        memcpy(w, "0000-00-00T00:00:00", 19); w += 19;
    } else { /* days since 1970-01-01 to a civil date (the proleptic Gregorian calendar, as Python's) */
        int64_t z = (int64_t)(seconds / 86400) + 719468, rest = (int64_t)(seconds % 86400);
        int64_t era = z / 146097, doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
        int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
        int64_t year = yoe + era * 400 + (month <= 2);
        w = digits_at(w, (uint64_t)year, 4); *w++ = '-';
        w = digits_at(w, (uint64_t)month, 2); *w++ = '-';
        w = digits_at(w, (uint64_t)day, 2); *w++ = 'T';
        w = digits_at(w, (uint64_t)(rest / 3600), 2); *w++ = ':';
        w = digits_at(w, (uint64_t)(rest / 60 % 60), 2); *w++ = ':';
        w = digits_at(w, (uint64_t)(rest % 60), 2);
    }
    if (scale) { *w++ = '.'; w = digits_at(w, micro, 6); }
    *w++ = 'Z';
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* TIME2 as time2_reader + cdc.values: '[-]hh:mm:ss[.ffffff]' from the total microseconds. */
static int put_time2(Buf *out, const unsigned char *p, long fsize, long scale) {
    static const uint64_t UNIT[4] = {0, 10000, 100, 1};
    int width = 3 + (int)fsize;
    int64_t raw = (int64_t)be(p, width) - ((int64_t)1 << (8 * width - 1));
    int negative = raw < 0;
    uint64_t magnitude = negative ? (uint64_t)(-raw) : (uint64_t)raw;
    uint64_t intpart = magnitude >> (8 * fsize), frac = magnitude & ((1ull << (8 * fsize)) - 1);
    uint64_t total = (((intpart >> 12) & 0x3FF) * 3600 + ((intpart >> 6) & 0x3F) * 60 + (intpart & 0x3F)) * 1000000 +
                     frac * UNIT[fsize];
    if (buf_reserve(out, 40) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    if (negative && total) *w++ = '-';
    uint64_t secs = total / 1000000;
    w = digits_at(w, secs / 3600, 2); *w++ = ':';
    w = digits_at(w, secs / 60 % 60, 2); *w++ = ':';
    w = digits_at(w, secs % 60, 2);
    if (scale) { *w++ = '.'; w = digits_at(w, total % 1000000, 6); }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static char B64_PAIRS[2 * 4096]; /* the two characters of every 12 bits, filled when the module loads */

/* binascii.b2a_base64(data.ljust(pad, b"\0"), newline=False), quoted. */
static int put_base64(Buf *out, const unsigned char *s, Py_ssize_t n, Py_ssize_t pad) {
    Py_ssize_t total = n > pad ? n : pad;
    if (buf_reserve(out, (total + 2) / 3 * 4 + 2) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3, w += 4) { /* whole groups of the value itself: no padding to decide */
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        memcpy(w, B64_PAIRS + 2 * (v >> 12), 2);
        memcpy(w + 2, B64_PAIRS + 2 * (v & 0xFFF), 2);
    }
    for (; i < total; i += 3) {
        uint32_t v = 0;
        int k;
        for (k = 0; k < 3; k++) v = v << 8 | (i + k < n ? s[i + k] : 0);
        int have = (int)(total - i < 3 ? total - i : 3);
        w[0] = B64[v >> 18 & 63]; w[1] = B64[v >> 12 & 63];
        w[2] = have > 1 ? B64[v >> 6 & 63] : '=';
        w[3] = have > 2 ? B64[v & 63] : '=';
        w += 4;
    }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (as Python's strict decoder accepts it), or 0. */
static int utf8_length(const unsigned char *s, Py_ssize_t left) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (left < n || s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < n; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    return n;
}

/* Whether none of 8 bytes is non-ASCII, a control character, '"' or '\\' (each test exact for "any byte"). */
static int plain8(uint64_t v) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t quote = v ^ (ones * '"'), backslash = v ^ (ones * '\\');
    uint64_t bad = (v & high) | ((v - ones * 0x20) & ~v & high) | ((quote - ones) & ~quote & high) |
                   ((backslash - ones) & ~backslash & high);
    return bad == 0;
}

/* UTF-8 text as orjson writes a str: quoted, with '"', '\\' and control characters escaped. */
static int put_text(Buf *out, const unsigned char *s, Py_ssize_t n) {
    static const char HEX[] = "0123456789abcdef";
    if (buf_reserve(out, 6 * n + 2) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n;) {
        if (n - i >= 8) { /* eight bytes at a time while none needs a look of its own */
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (plain8(v)) { memcpy(w, s + i, 8); w += 8; i += 8; continue; }
        }
        unsigned char c = s[i];
        if (c >= 0x80) {
            int k = utf8_length(s + i, n - i);
            if (!k) {
                PyErr_Format(PyExc_ValueError, "invalid UTF-8 at byte %zd of a text value", i);
                return -1;
            }
            memcpy(w, s + i, k); w += k; i += k;
            continue;
        }
        i++;
        if (c == '"' || c == '\\') { *w++ = '\\'; *w++ = (char)c; }
        else if (c >= 0x20) *w++ = (char)c;
        else if (c == '\n') { *w++ = '\\'; *w++ = 'n'; }
        else if (c == '\r') { *w++ = '\\'; *w++ = 'r'; }
        else if (c == '\t') { *w++ = '\\'; *w++ = 't'; }
        else if (c == '\b') { *w++ = '\\'; *w++ = 'b'; }
        else if (c == '\f') { *w++ = '\\'; *w++ = 'f'; }
        else { memcpy(w, "\\u00", 4); w[4] = HEX[c >> 4]; w[5] = HEX[c & 15]; w += 6; }
    }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* The Python reader's value of a column, as orjson.dumps writes it; the reader returns the next offset. */
static int put_python(Buf *out, PyObject *reader, PyObject *dumps, PyObject *body, Py_ssize_t *pos) {
    PyObject *at = PyLong_FromSsize_t(*pos);
    if (!at) return -1;
    PyObject *got = PyObject_CallFunctionObjArgs(reader, body, at, NULL);
    Py_DECREF(at);
    if (!got) return -1;
    if (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
        Py_DECREF(got);
        PyErr_SetString(PyExc_TypeError, "a column reader must return (value, offset)");
        return -1;
    }
    Py_ssize_t next = PyLong_AsSsize_t(PyTuple_GET_ITEM(got, 1));
    PyObject *json = next < 0 ? NULL : PyObject_CallOneArg(dumps, PyTuple_GET_ITEM(got, 0));
    Py_DECREF(got);
    if (!json) return -1;
    int rc = -1;
    if (!PyBytes_Check(json)) PyErr_SetString(PyExc_TypeError, "dumps must return bytes");
    else if (next < *pos || next > PyBytes_GET_SIZE(body)) truncated(next, PyBytes_GET_SIZE(body));
    else rc = buf_put(out, PyBytes_AS_STRING(json), PyBytes_GET_SIZE(json));
    Py_DECREF(json);
    *pos = next;
    return rc;
}

/* Bytes of a fixed-width value, or -1 for a length-prefixed one. */
static Py_ssize_t fixed_width(const Column *c) {
    switch (c->action) {
    case A_INT: return c->a;
    case A_DECIMAL: return decimal_size(c->a, c->b);
    case A_DATETIME2: return 5 + c->a;
    case A_DATE: return 3;
    case A_ENUM: return c->a;
    case A_YEAR: return 1;
    case A_TIMESTAMP2: return 4 + c->a;
    case A_TIME2: return 3 + c->a;
    default: return -1;
    }
}

/* One column's value at *pos into `out` (its JSON); *pos moves past it. */
static int read_value(Buf *out, const Column *c, PyObject *body, Py_ssize_t *pos, PyObject *dumps) {
    const unsigned char *base = (const unsigned char *)PyBytes_AS_STRING(body);
    Py_ssize_t end = PyBytes_GET_SIZE(body);
    if (c->action == A_PYTHON) return put_python(out, c->extra, dumps, body, pos);
    Py_ssize_t width = fixed_width(c);
    const unsigned char *p = base + *pos;
    if (width >= 0) {
        if (width > end - *pos) return truncated(*pos + width, end);
        *pos += width;
        switch (c->action) {
        case A_INT: return put_int(out, p, c->a, c->b);
        case A_DECIMAL: return put_decimal(out, p, c->a, c->b);
        case A_DATETIME2: return put_datetime2(out, p, c->a, c->b);
        case A_DATE: return put_date(out, p);
        case A_YEAR: return put_year(out, p);
        case A_TIMESTAMP2: return put_timestamp2(out, p, c->a, c->b);
        case A_TIME2: return put_time2(out, p, c->a, c->b);
        default: {
            uint64_t index = le(p, (int)c->a);
            Py_ssize_t labels = PyTuple_GET_SIZE(c->extra);
            PyObject *label = PyTuple_GET_ITEM(c->extra, index < (uint64_t)labels - 1 ? (Py_ssize_t)index : labels - 1);
            return buf_put(out, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label));
        }
        }
    }
    if (c->a > end - *pos) return truncated(*pos + c->a, end);
    Py_ssize_t n = (Py_ssize_t)le(p, (int)c->a);
    if (n > end - *pos - c->a) return truncated(*pos + c->a + n, end);
    *pos += c->a + n;
    if (c->action == A_TEXT) return put_text(out, p + c->a, n);
    return put_base64(out, p + c->a, n, c->b);
}

typedef struct {
    Py_ssize_t ncols;
    Column *cols;
    PyObject *names;    /* tuple of (column index, b'"name":') in the image's key order (sorted, kept only) */
    PyObject *keys;     /* the same for the key's columns */
    Py_ssize_t *name_index, *key_index; /* the column indexes of names and keys, read once by compile() */
    PyObject *dumps;
} Plan;

/* One image (NULL bitmap, then the present values) into spans of `scratch`; *pos moves past it. */
static int read_image(const Plan *plan, PyObject *body, Py_ssize_t *pos, Buf *scratch, Span *spans) {
    const unsigned char *base = (const unsigned char *)PyBytes_AS_STRING(body);
    Py_ssize_t end = PyBytes_GET_SIZE(body), bitmap = (plan->ncols + 7) / 8;
    if (bitmap > end - *pos) return truncated(*pos + bitmap, end);
    const unsigned char *nulls = base + *pos;
    *pos += bitmap;
    for (Py_ssize_t i = 0; i < plan->ncols; i++) {
        spans[i].start = scratch->len;
        if (nulls[i / 8] >> (i % 8) & 1) {
            if (buf_put(scratch, "null", 4) < 0) return -1;
        } else if (read_value(scratch, &plan->cols[i], body, pos, plan->dumps) < 0) {
            return -1;
        }
        spans[i].len = scratch->len - spans[i].start;
    }
    return 0;
}

/* {"name":value,...} of one image, columns in `names` order. */
static int put_object(Buf *out, PyObject *names, const Py_ssize_t *index, const Buf *scratch, const Span *spans) {
    if (buf_put(out, "{", 1) < 0) return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        PyObject *entry = PyTuple_GET_ITEM(names, k);
        Py_ssize_t i = index[k];
        PyObject *name = PyTuple_GET_ITEM(entry, 1);
        if ((k && buf_put(out, ",", 1) < 0) || buf_put(out, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)) < 0 ||
            buf_put(out, scratch->data + spans[i].start, spans[i].len) < 0)
            return -1;
    }
    return buf_put(out, "}", 1);
}

static void plan_free(PyObject *capsule) {
    Plan *plan = PyCapsule_GetPointer(capsule, "cdc.rows.plan");
    if (!plan) return;
    for (Py_ssize_t i = 0; i < plan->ncols; i++) Py_XDECREF(plan->cols[i].extra);
    PyMem_Free(plan->cols);
    PyMem_Free(plan->name_index);
    PyMem_Free(plan->key_index);
    Py_XDECREF(plan->names);
    Py_XDECREF(plan->keys);
    Py_XDECREF(plan->dumps);
    PyMem_Free(plan);
}

static int check_entries(PyObject *entries, Py_ssize_t ncols) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(entries); k++) {
        PyObject *entry = PyTuple_GET_ITEM(entries, k);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "an image entry is (column index, bytes)");
            return -1;
        }
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
        if (i < 0 || i >= ncols) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an image entry names no column");
            return -1;
        }
    }
    return 0;
}

static int parse_column(PyObject *spec, Column *c) {
    PyObject *extra;
    if (!PyArg_ParseTuple(spec, "illO", &c->action, &c->a, &c->b, &extra)) return -1;
    int ok;
    switch (c->action) {
    case A_PYTHON: ok = PyCallable_Check(extra); break;
    case A_INT: ok = c->a == 1 || c->a == 2 || c->a == 3 || c->a == 4 || c->a == 8; break;
    case A_DECIMAL: ok = c->a > 0 && c->a <= 65 && c->b >= 0 && c->b <= 30 && c->b <= c->a; break;
    case A_TEXT: case A_BASE64: ok = c->a >= 1 && c->a <= 4 && c->b >= 0 && c->b <= 255; break;
    case A_DATETIME2: ok = c->a >= 0 && c->a <= 3 && c->b >= 0 && c->b <= 1000000; break;
    case A_DATE: case A_YEAR: ok = 1; break;
    case A_TIMESTAMP2: case A_TIME2: ok = c->a >= 0 && c->a <= 3 && (c->b == 0 || c->b == 1); break;
    case A_ENUM: {
        ok = c->a >= 1 && c->a <= 8 && PyTuple_Check(extra) && PyTuple_GET_SIZE(extra) > 0;
        for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(extra); i++) ok = PyBytes_Check(PyTuple_GET_ITEM(extra, i));
        break;
    }
    default: ok = 0;
    }
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "bad column program entry (action %d)", c->action);
        return -1;
    }
    Py_INCREF(extra);
    c->extra = extra;
    return 0;
}

/* The column index of every (index, name) entry (check_entries checked them), or NULL with an error set. */
static Py_ssize_t *entry_indexes(PyObject *entries) {
    Py_ssize_t count = PyTuple_GET_SIZE(entries);
    Py_ssize_t *index = PyMem_Calloc(count ? count : 1, sizeof(Py_ssize_t));
    if (!index) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t k = 0; k < count; k++) index[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyTuple_GET_ITEM(entries, k), 0));
    return index;
}

/* compile(columns, names, keys, dumps) -> a plan: columns is one (action, a, b, extra) per table-map column. */
static PyObject *compile_plan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *columns, *names, *keys, *dumps;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyTuple_Type, &columns, &PyTuple_Type, &names, &PyTuple_Type, &keys, &dumps))
        return NULL;
    Py_ssize_t ncols = PyTuple_GET_SIZE(columns);
    if (ncols == 0 || check_entries(names, ncols) < 0 || check_entries(keys, ncols) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a plan needs columns");
        return NULL;
    }
    Plan *plan = PyMem_Calloc(1, sizeof(Plan));
    if (!plan) return PyErr_NoMemory();
    plan->cols = PyMem_Calloc(ncols, sizeof(Column));
    if (!plan->cols) { PyMem_Free(plan); return PyErr_NoMemory(); }
    Py_INCREF(names); Py_INCREF(keys); Py_INCREF(dumps);
    plan->names = names; plan->keys = keys; plan->dumps = dumps;
    PyObject *capsule = PyCapsule_New(plan, "cdc.rows.plan", plan_free);
    if (!capsule) {
        Py_DECREF(names); Py_DECREF(keys); Py_DECREF(dumps);
        PyMem_Free(plan->cols); PyMem_Free(plan);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ncols; i++) {
        if (parse_column(PyTuple_GET_ITEM(columns, i), &plan->cols[i]) < 0) { Py_DECREF(capsule); return NULL; }
        plan->ncols = i + 1; /* plan_free releases the columns parsed so far */
    }
    if (!(plan->name_index = entry_indexes(names)) || !(plan->key_index = entry_indexes(keys))) {
        Py_DECREF(capsule);
        return NULL;
    }
    return capsule;
}

static int put_bytes(Buf *out, PyObject *b) { return buf_put(out, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)); }

/* rows(plan, body, op, first, p1, p2, p3, p4) -> (lines, count): every row's line from `first` on,
 * {"after":A,"before":B <p1> K <p2> %012d <p3> %d <p4> (cdc.capture.nativeblock builds the pieces). */
static PyObject *rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *body, *p1, *p2, *p3, *p4;
    int op;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "OO!CnO!O!O!O!", &capsule, &PyBytes_Type, &body, &op, &first, &PyBytes_Type, &p1,
                          &PyBytes_Type, &p2, &PyBytes_Type, &p3, &PyBytes_Type, &p4))
        return NULL;
    Plan *plan = PyCapsule_GetPointer(capsule, "cdc.rows.plan");
    if (!plan) return NULL;
    if (op != 'c' && op != 'u' && op != 'd') return PyErr_Format(PyExc_ValueError, "unknown rows-event op %c", op);
    Buf out = {0}, before = {0}, after = {0};
    Span *spans = PyMem_Calloc(2 * plan->ncols, sizeof(Span));
    if (!spans) return PyErr_NoMemory();
    if (buf_start_bytes(&out, 2 * PyBytes_GET_SIZE(body) + 4096) < 0) { PyMem_Free(spans); return NULL; }
    Span *bspans = spans, *aspans = spans + plan->ncols;
    Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(body), index = 0;
    PyObject *result = NULL;
    char digits[32];
    for (; pos < end; index++) {
        before.len = after.len = 0;
        if (op != 'c' && read_image(plan, body, &pos, &before, bspans) < 0) goto done;
        if (op != 'd' && read_image(plan, body, &pos, &after, aspans) < 0) goto done;
        if (index < first) continue;
        const Buf *row = op == 'd' ? &before : &after;
        const Span *rspans = op == 'd' ? bspans : aspans;
        if (buf_put(&out, "{\"after\":", 9) < 0) goto done;
        if (op == 'd' ? buf_put(&out, "null", 4) < 0 : put_object(&out, plan->names, plan->name_index, &after, aspans) < 0) goto done;
        if (buf_put(&out, ",\"before\":", 10) < 0) goto done;
        if (op == 'c' ? buf_put(&out, "null", 4) < 0 : put_object(&out, plan->names, plan->name_index, &before, bspans) < 0) goto done;
        if (put_bytes(&out, p1) < 0 || put_object(&out, plan->keys, plan->key_index, row, rspans) < 0 || put_bytes(&out, p2) < 0)
            goto done;
        Py_ssize_t n = digits_at(digits, (uint64_t)index, 12) - digits;
        if (buf_put(&out, digits, n) < 0 || put_bytes(&out, p3) < 0) goto done;
        n = digits_at(digits, (uint64_t)index, 1) - digits;
        if (buf_put(&out, digits, n) < 0 || put_bytes(&out, p4) < 0) goto done;
    }
    PyObject *lines = buf_result(&out);
    if (lines) result = Py_BuildValue("(Nn)", lines, index > first ? index - first : 0);
done:
    Py_XDECREF(out.bytes);
    PyMem_Free(before.data);
    PyMem_Free(after.data);
    PyMem_Free(spans);
    return result;
}

/* finish(block, xid, end) -> block.replace(b"\x00", xid).replace(b"\x01", end) in one pass: the commit's
 * fields put into a transaction's lines (cdc.capture.txn; the markers occur nowhere else in a line). */
static PyObject *finish(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block;
    PyObject *xid, *end;
    if (!PyArg_ParseTuple(args, "y*SS", &block, &xid, &end)) return NULL;
    const char *p = block.buf, *stop = p + block.len;
    Buf out = {0};
    PyObject *result = NULL;
    if (buf_start_bytes(&out, block.len + block.len / 4 + 64) < 0) goto done;
    const char *zero = memchr(p, 0, (size_t)(stop - p)), *one = memchr(p, 1, (size_t)(stop - p));
    while (zero || one) {
        int is_zero = zero && (!one || zero < one);
        const char *mark = is_zero ? zero : one;
        if (buf_put(&out, p, mark - p) < 0 || put_bytes(&out, is_zero ? xid : end) < 0) goto done;
        p = mark + 1;
        if (is_zero) zero = memchr(p, 0, (size_t)(stop - p));
        else one = memchr(p, 1, (size_t)(stop - p));
    }
    if (buf_put(&out, p, stop - p) < 0) goto done;
    result = buf_result(&out);
done:
    Py_XDECREF(out.bytes);
    PyBuffer_Release(&block);
    return result;
}

static PyMethodDef module_methods[] = {
    {"finish", finish, METH_VARARGS, "finish(block, xid, end) -> the block with its markers replaced"},
    {"compile", compile_plan, METH_VARARGS, "compile(columns, names, keys, dumps) -> plan"},
    {"rows", rows, METH_VARARGS, "rows(plan, body, op, first, p1, p2, p3, p4) -> (lines, count)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__native(void) {
    for (int v = 0; v < 4096; v++) {
        B64_PAIRS[2 * v] = B64[v >> 6];
        B64_PAIRS[2 * v + 1] = B64[v & 63];
    }
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    const struct { const char *name; long value; } constants[] = {
        {"ABI_VERSION", ABI_VERSION}, {"PYTHON", A_PYTHON}, {"INT", A_INT}, {"DECIMAL", A_DECIMAL}, {"TEXT", A_TEXT},
        {"BASE64", A_BASE64}, {"DATETIME2", A_DATETIME2}, {"DATE", A_DATE}, {"ENUM", A_ENUM}, {"YEAR", A_YEAR},
        {"TIMESTAMP2", A_TIMESTAMP2}, {"TIME2", A_TIME2},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
        if (PyModule_AddIntConstant(module, constants[i].name, constants[i].value) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
