/* Tail's C row decoder (see _native.c): one row image (NULL bitmap, then the present values) as JSON values;
 * text validated as UTF-8 and escaped as orjson escapes it, binary (and GEOMETRY) in base64, an ENUM's label,
 * the fixed-width values of _native_numbers.c and _native_types.c, text in other charsets (_native_types.c),
 * and every other column through its Python reader and orjson.dumps. Every read is checked against the
 * body's end first.
 */
#include "_native.h"

static int truncated(Py_ssize_t pos, Py_ssize_t end) {
    PyErr_Format(PyExc_ValueError, "rows event truncated: a value runs past byte %zd of %zd", pos, end);
    return -1;
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

/* A mask with the high bit set in each of 8 bytes that is non-ASCII, a control character, '"' or '\\'.
 * Each test is exact for "any byte", and its lowest set bit is exact too (a false mark needs a borrow from a
 * true one below it): its byte is the first that needs a look of its own. */
static uint64_t special8(uint64_t v) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t quote = v ^ (ones * '"'), backslash = v ^ (ones * '\\');
    return (v & high) | ((v - ones * 0x20) & ~v & high) | ((quote - ones) & ~quote & high) |
           ((backslash - ones) & ~backslash & high);
}

/* UTF-8 text as orjson writes a str: quoted, with '"', '\\' and control characters escaped. */
int put_text(Buf *out, const unsigned char *s, Py_ssize_t n) {
    static const char HEX[] = "0123456789abcdef";
    if (buf_reserve(out, 6 * n + 2) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n;) {
        if (n - i >= 8) { /* eight bytes at a time, up to the first that needs a look of its own */
            uint64_t v;
            memcpy(&v, s + i, 8);
            uint64_t special = special8(v);
            memcpy(w, s + i, 8); /* room: 6 bytes reserved per byte of the value; only the plain ones count */
            if (!special) { w += 8; i += 8; continue; }
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            int plain = __builtin_clzll(special) >> 3; /* the first byte is the highest */
#else
            int plain = __builtin_ctzll(special) >> 3; /* the first byte is the lowest */
#endif
            w += plain; i += plain;
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
    case A_FLOAT: return 4;
    case A_DOUBLE: return 8;
    case A_BIT: case A_SET: return c->a;
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
        case A_FLOAT: return put_float(out, p);
        case A_DOUBLE: return put_double(out, p);
        case A_BIT: return put_bit(out, p, c->a);
        case A_SET: return put_set(out, p, c->a, c->extra);
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
    if (c->action == A_CHARMAP) return put_charmap(out, p + c->a, n, c->extra);
    if (c->action == A_CODEC) return put_codec(out, p + c->a, n, c->extra);
    if (c->action == A_JSON) /* 0 bytes: JSON null, as MySQL reads an empty document */
        return n ? put_json(out, p + c->a, n, dumps) : buf_put(out, "\"null\"", 6);
    return put_base64(out, p + c->a, n, c->b);
}

/* One image (NULL bitmap, then the present values) into spans of `scratch`; *pos moves past it. */
int read_image(const Plan *plan, PyObject *body, Py_ssize_t *pos, Buf *scratch, Span *spans) {
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

/* The base64 pair table, filled once when the module loads. */
void base64_init(void) {
    for (int v = 0; v < 4096; v++) {
        B64_PAIRS[2 * v] = B64[v >> 6];
        B64_PAIRS[2 * v + 1] = B64[v & 63];
    }
}
