/* Tail's C row decoder (see _native.c): MySQL 8's binary JSON as the JSON text MySQL shows for it (issue 28).
 *
 * The Python paths read a document with cdc.rows.json_binary (json_text), the text MySQL's SELECT gives for it
 * (json_dom.cc's wrapper_to_string), compact with keys sorted as orjson's OPT_SORT_KEYS sorts them, and write
 * it as a JSON string in the line. Here the binary document
 * (https://dev.mysql.com/doc/dev/mysql-server/latest/json__binary_8h.html) becomes that text directly: keys
 * sorted by their UTF-8 bytes (code point order, as orjson sorts str), strings escaped as orjson escapes them,
 * doubles as orjson writes a float, integers as they are, and opaque values as MySQL prints them: DECIMAL as
 * its exact digits, DATE as "YYYY-MM-DD", DATETIME and TIMESTAMP as "YYYY-MM-DD HH:MM:SS.ffffff", TIME as
 * "[-]HH:MM:SS.ffffff" (my_TIME_to_str with 6 digits), an opaque VAR_STRING as its string, any other type as
 * "base64:type<N>:<base64>" (a line break every 76 characters, as MySQL's base64_encode). A document of
 * 0 bytes is null (MySQL's parse_binary), written by the caller (_native_image.c).
 *
 * Exactness rule (_native.c): anything else raises (an offset or length past the document, an unknown type
 * or literal, invalid UTF-8, a temporal field out of MySQL's range, a DECIMAL digit group out of range, a
 * duplicate key, nesting past MySQL's 100 levels), and the event goes to the Python path, which raises the
 * same. Every read is checked against the end first.
 */
#include "_native.h"
#include <math.h>

enum { J_SMALL_OBJECT, J_LARGE_OBJECT, J_SMALL_ARRAY, J_LARGE_ARRAY, J_LITERAL, J_INT16, J_UINT16, J_INT32,
       J_UINT32, J_INT64, J_UINT64, J_DOUBLE, J_STRING, J_OPAQUE = 0xF };
#define MAX_DEPTH 100 /* MySQL's JSON_DOCUMENT_MAX_DEPTH; orjson itself stops at 255 */

/* MySQL column types of the opaque values MySQL prints as values (json_dom.cc's Json_wrapper::type()) */
enum { T_TIMESTAMP = 7, T_DATE = 10, T_TIME = 11, T_DATETIME = 12, T_NEWDECIMAL = 246, T_VAR_STRING = 253 };
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int bad(const char *what) {
    PyErr_Format(PyExc_ValueError, "MySQL binary JSON: %s", what);
    return -1;
}

static int put_value(Buf *doc, int type, const unsigned char *p, Py_ssize_t avail, int depth, PyObject *dumps);

/* A string's or opaque value's length (7 bits a byte, at most 5 bytes) at p; its bytes must follow in avail. */
static int var_length(const unsigned char *p, Py_ssize_t avail, Py_ssize_t *start, Py_ssize_t *length) {
    uint64_t n = 0;
    for (int i = 0; i < 5 && i < avail; i++) {
        n |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (!(p[i] & 0x80)) {
            if (n > (uint64_t)(avail - i - 1)) return bad("a string runs past the document's end");
            *start = i + 1;
            *length = (Py_ssize_t)n;
            return 0;
        }
    }
    return bad("a string's length is cut or too long");
}

static int put_signed(Buf *doc, int64_t v) {
    if (buf_reserve(doc, 24) < 0) return -1;
    char *w = doc->data + doc->len;
    uint64_t magnitude = (uint64_t)v;
    if (v < 0) { *w++ = '-'; magnitude = (uint64_t)0 - magnitude; }
    doc->len = digits_at(w, magnitude, 1) - doc->data;
    return 0;
}

static int put_unsigned(Buf *doc, uint64_t v) {
    if (buf_reserve(doc, 24) < 0) return -1;
    doc->len = digits_at(doc->data + doc->len, v, 1) - doc->data;
    return 0;
}

/* A Python value (a new reference, or NULL with an error set) as orjson writes it: exact by construction. */
static int put_dumped(Buf *doc, PyObject *value, PyObject *dumps) {
    if (!value) return -1;
    PyObject *json = PyObject_CallOneArg(dumps, value);
    Py_DECREF(value);
    if (!json) return -1;
    int rc = PyBytes_Check(json) ? buf_put(doc, PyBytes_AS_STRING(json), PyBytes_GET_SIZE(json))
                                 : bad("dumps must return bytes");
    Py_DECREF(json);
    return rc;
}

/* A float as orjson writes it: Python's repr where that has no exponent (they agree there), else orjson itself. */
static int put_doc_double(Buf *doc, double v, PyObject *dumps) {
    if (isfinite(v)) {
        char *text = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!text) return -1;
        if (!strchr(text, 'e')) {
            int rc = buf_put(doc, text, (Py_ssize_t)strlen(text));
            PyMem_Free(text);
            return rc;
        }
        PyMem_Free(text);
    }
    return put_dumped(doc, PyFloat_FromDouble(v), dumps);
}

/* An opaque DECIMAL (precision, scale, MySQL's binary DECIMAL) as its exact digits (decimal2string): put_decimal's
 * text without its quotes. */
static int put_json_decimal(Buf *doc, const unsigned char *p, Py_ssize_t n) {
    if (n < 2) return bad("a DECIMAL without precision and scale");
    long precision = p[0], scale = p[1];
    if (precision < 1 || precision > 65 || scale > 30 || scale > precision || decimal_size(precision, scale) > n - 2)
        return bad("a DECIMAL of a bad precision, scale or size");
    Py_ssize_t at = doc->len;
    if (put_decimal(doc, p + 2, precision, scale) < 0) return -1;
    memmove(doc->data + at, doc->data + at + 1, (size_t)(doc->len - at - 2)); /* "-123.4500" -> -123.4500 */
    doc->len -= 2;
    return 0;
}

/* The sign, integer part and microseconds of an opaque temporal value's packed int64 (TIME_from_longlong_*_packed). */
static int packed(const unsigned char *p, Py_ssize_t n, int *negative, uint64_t *whole, uint64_t *micro) {
    if (n < 8) return bad("a packed time shorter than 8 bytes");
    int64_t raw = (int64_t)le(p, 8);
    uint64_t v = raw < 0 ? (uint64_t)0 - (uint64_t)raw : (uint64_t)raw;
    *negative = raw < 0;
    *whole = v >> 24;
    *micro = v % (1 << 24);
    return 0;
}

/* "HH:MM:SS.ffffff" at w (hours of 2 digits or more, always 6 fraction digits, as MySQL prints JSON times). */
static char *clock_at(char *w, uint64_t hour, uint64_t minute, uint64_t second, uint64_t micro) {
    w = digits_at(w, hour, 2);
    *w++ = ':';
    w = digits_at(w, minute, 2);
    *w++ = ':';
    w = digits_at(w, second, 2);
    *w++ = '.';
    return digits_at(w, micro, 6);
}

/* An opaque TIME as MySQL prints it: "[-]HH:MM:SS.ffffff", the sign on the whole value, hours up to 838. */
static int put_json_time(Buf *doc, const unsigned char *p, Py_ssize_t n) {
    int negative;
    uint64_t whole, micro;
    if (packed(p, n, &negative, &whole, &micro) < 0) return -1;
    uint64_t hour = (whole >> 12) % 1024, minute = (whole >> 6) % 64, second = whole % 64;
    if (hour > 838 || minute > 59 || second > 59 || micro > 999999) return bad("a TIME out of range");
    if (buf_reserve(doc, 24) < 0) return -1;
    char *w = doc->data + doc->len;
    *w++ = '"';
    if (negative) *w++ = '-';
    w = clock_at(w, hour, minute, second, micro);
    *w++ = '"';
    doc->len = w - doc->data;
    return 0;
}

/* An opaque DATETIME or TIMESTAMP as "YYYY-MM-DD HH:MM:SS.ffffff", a DATE as "YYYY-MM-DD" (no sign: MySQL prints
 * none for a date; zero months and days as they are). */
static int put_json_datetime(Buf *doc, const unsigned char *p, Py_ssize_t n, int date_only) {
    int negative;
    uint64_t whole, micro;
    if (packed(p, n, &negative, &whole, &micro) < 0) return -1;
    uint64_t ymd = whole >> 17, ym = ymd >> 5, hms = whole % (1 << 17);
    uint64_t hour = hms >> 12, minute = (hms >> 6) % 64, second = hms % 64;
    if (ym / 13 > 9999 || hour > 23 || minute > 59 || second > 59 || micro > 999999)
        return bad("a DATETIME out of range");
    if (buf_reserve(doc, 32) < 0) return -1;
    char *w = doc->data + doc->len;
    *w++ = '"';
    w = digits_at(w, ym / 13, 4);
    *w++ = '-';
    w = digits_at(w, ym % 13, 2);
    *w++ = '-';
    w = digits_at(w, ymd % 32, 2);
    if (!date_only) {
        *w++ = ' ';
        w = clock_at(w, hour, minute, second, micro);
    }
    *w++ = '"';
    doc->len = w - doc->data;
    return 0;
}

/* Any other opaque value as MySQL prints it: "base64:type<N>:<base64>", with an (escaped) line break before every
 * 76 characters past the first, as MySQL's base64_encode breaks its lines. */
static int put_json_base64(Buf *doc, int type, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t chars = (n + 2) / 3 * 4;
    if (buf_reserve(doc, 20 + chars + 2 * (chars / 76) + 2) < 0) return -1;
    char *w = doc->data + doc->len;
    memcpy(w, "\"base64:type", 12);
    w = digits_at(w + 12, (uint64_t)type, 1);
    *w++ = ':';
    int line = 0;
    for (Py_ssize_t i = 0; i < n; i += 3) {
        if (line == 76) { *w++ = '\\'; *w++ = 'n'; line = 0; }
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *w++ = i + 2 < n ? B64[v & 63] : '=';
        line += 4;
    }
    *w++ = '"';
    doc->len = w - doc->data;
    return 0;
}

/* An opaque value (MySQL type, length, bytes) as MySQL prints it. */
static int put_opaque(Buf *doc, const unsigned char *p, Py_ssize_t avail) {
    Py_ssize_t start, n;
    if (avail < 1) return bad("an opaque value without its type");
    if (var_length(p + 1, avail - 1, &start, &n) < 0) return -1;
    int type = p[0];
    const unsigned char *data = p + 1 + start;
    switch (type) {
    case T_NEWDECIMAL: return put_json_decimal(doc, data, n);
    case T_TIME: return put_json_time(doc, data, n);
    case T_DATETIME: case T_TIMESTAMP: return put_json_datetime(doc, data, n, 0);
    case T_DATE: return put_json_datetime(doc, data, n, 1);
    case T_VAR_STRING: return put_text(doc, data, n); /* a string kept as opaque: printed as the string */
    default: return put_json_base64(doc, type, data, n);
    }
}

typedef struct { const unsigned char *key; Py_ssize_t len, index; } Key;

static int key_order(const void *x, const void *y) {
    const Key *a = x, *b = y;
    int c = memcmp(a->key, b->key, (size_t)(a->len < b->len ? a->len : b->len));
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Value entry i of a container at p (entries from `entries`, `slot` bytes of offset), into doc. */
static int put_entry(Buf *doc, const unsigned char *p, Py_ssize_t avail, Py_ssize_t entry, int large, int depth,
                     PyObject *dumps) {
    int type = p[entry], slot = large ? 4 : 2;
    if (type == J_LITERAL || type == J_INT16 || type == J_UINT16 || (large && (type == J_INT32 || type == J_UINT32)))
        return put_value(doc, type, p + entry + 1, slot, depth, dumps); /* inlined in the entry */
    uint64_t offset = le(p + entry + 1, slot);
    if (offset > (uint64_t)avail) return bad("a value offset past the document's end");
    return put_value(doc, type, p + offset, avail - (Py_ssize_t)offset, depth, dumps);
}

/* An object or array (count, size, key entries, value entries, then keys and values) as orjson writes it. */
static int put_container(Buf *doc, const unsigned char *p, Py_ssize_t avail, int large, int object, int depth,
                         PyObject *dumps) {
    if (depth > MAX_DEPTH) return bad("nested deeper than 100 levels");
    int slot = large ? 4 : 2;
    if (avail < 2 * slot) return bad("a container's header runs past the document's end");
    uint64_t count = le(p, slot), size = le(p + slot, slot);
    uint64_t key_entry = object ? (uint64_t)slot + 2 : 0, value_entry = 1 + (uint64_t)slot;
    if (size > (uint64_t)avail) return bad("a container's size runs past the document's end");
    if (2 * (uint64_t)slot + count * (key_entry + value_entry) > size) return bad("a container's entries run past its size");
    Py_ssize_t values = 2 * slot + (Py_ssize_t)(count * key_entry);
    if (!object) {
        if (buf_put(doc, "[", 1) < 0) return -1;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
            if ((i && buf_put(doc, ",", 1) < 0) ||
                put_entry(doc, p, avail, values + i * (Py_ssize_t)value_entry, large, depth + 1, dumps) < 0)
                return -1;
        }
        return buf_put(doc, "]", 1);
    }
    Key *keys = PyMem_Calloc(count ? count : 1, sizeof(Key));
    if (!keys) { PyErr_NoMemory(); return -1; }
    int rc = -1;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        const unsigned char *e = p + 2 * slot + i * (Py_ssize_t)key_entry;
        uint64_t offset = le(e, slot), length = le(e + slot, 2);
        if (offset > (uint64_t)avail || length > (uint64_t)avail - offset) { bad("a key past the document's end"); goto done; }
        keys[i] = (Key){p + offset, (Py_ssize_t)length, i};
    }
    qsort(keys, (size_t)count, sizeof(Key), key_order);
    if (buf_put(doc, "{", 1) < 0) goto done;
    for (Py_ssize_t k = 0; k < (Py_ssize_t)count; k++) {
        if (k && key_order(&keys[k - 1], &keys[k]) == 0) { bad("a duplicate key"); goto done; }
        if ((k && buf_put(doc, ",", 1) < 0) || put_text(doc, keys[k].key, keys[k].len) < 0 || buf_put(doc, ":", 1) < 0 ||
            put_entry(doc, p, avail, values + keys[k].index * (Py_ssize_t)value_entry, large, depth + 1, dumps) < 0)
            goto done;
    }
    rc = buf_put(doc, "}", 1);
done:
    PyMem_Free(keys);
    return rc;
}

/* One value of `type` whose bytes start at p (avail of them up to the document's end), as JSON into doc. */
static int put_value(Buf *doc, int type, const unsigned char *p, Py_ssize_t avail, int depth, PyObject *dumps) {
    static const int WIDTH[] = {0, 0, 0, 0, 1, 2, 2, 4, 4, 8, 8, 8};
    if (type >= J_LITERAL && type <= J_DOUBLE && avail < WIDTH[type]) return bad("a number past the document's end");
    switch (type) {
    case J_SMALL_OBJECT: case J_LARGE_OBJECT: case J_SMALL_ARRAY: case J_LARGE_ARRAY:
        return put_container(doc, p, avail, type == J_LARGE_OBJECT || type == J_LARGE_ARRAY,
                             type == J_SMALL_OBJECT || type == J_LARGE_OBJECT, depth, dumps);
    case J_LITERAL:
        if (p[0] > 2) return bad("an unknown literal");
        return p[0] == 0 ? buf_put(doc, "null", 4) : p[0] == 1 ? buf_put(doc, "true", 4) : buf_put(doc, "false", 5);
    case J_INT16: return put_signed(doc, (int16_t)le(p, 2));
    case J_UINT16: return put_unsigned(doc, le(p, 2));
    case J_INT32: return put_signed(doc, (int32_t)le(p, 4));
    case J_UINT32: return put_unsigned(doc, le(p, 4));
    case J_INT64: return put_signed(doc, (int64_t)le(p, 8));
    case J_UINT64: return put_unsigned(doc, le(p, 8));
    case J_DOUBLE: {
        uint64_t bits = le(p, 8);
        double v;
        memcpy(&v, &bits, 8);
        return put_doc_double(doc, v, dumps);
    }
    case J_STRING: {
        Py_ssize_t start, n;
        if (var_length(p, avail, &start, &n) < 0) return -1;
        return put_text(doc, p + start, n);
    }
    case J_OPAQUE: return put_opaque(doc, p, avail);
    default: return bad("an unknown value type");
    }
}

/* A JSON column's document (n > 0 bytes: type, value) as its change-log value, MySQL's JSON text as a string
 * (cdc.rows.json_binary.json_text), into out. */
int put_json(Buf *out, const unsigned char *p, Py_ssize_t n, PyObject *dumps) {
    Buf doc = {0};
    int rc = put_value(&doc, p[0], p + 1, n - 1, 1, dumps);
    if (rc == 0) rc = put_text(out, (const unsigned char *)doc.data, doc.len);
    PyMem_Free(doc.data);
    return rc;
}
