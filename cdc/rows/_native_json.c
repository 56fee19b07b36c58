/* Tail's C row decoder (see _native.c): MySQL 8's binary JSON as the Python path writes it (issue 28).
 *
 * The Python path reads a document with python-mysql-replication's parse_json (cdc.rows.strings.json_reader)
 * and cdc.values' _encode_json writes its value: orjson.dumps(value, OPT_SORT_KEYS) as a JSON string in the
 * line. Here the binary document (https://dev.mysql.com/doc/dev/mysql-server/latest/json__binary_8h.html)
 * becomes that text directly: keys sorted by their UTF-8 bytes (code point order, as orjson sorts str),
 * strings escaped as orjson escapes them, doubles as orjson writes a float, integers as they are, and the
 * library's opaque values: DECIMAL as an int when it is integral else a float, TIME (a datetime.time) and
 * DATE/DATETIME (a datetime) through orjson itself, the zero date as the library's string, other opaque
 * types as their UTF-8 text. The library's value at the top of a document keeps its quirks:
 * a string (or an opaque string) is the column's text without quotes, JSON null is the column's null.
 *
 * Exactness rule (_native.c): anything else raises (an offset or length past the document, an unknown type
 * or literal, invalid UTF-8, an invalid date or time, an integer past 64 bits, a duplicate key, nesting past
 * MySQL's 100 levels), and the event goes to the Python path. Every read is checked against the end first.
 */
#include "_native.h"
#include <datetime.h>
#include <math.h>

enum { J_SMALL_OBJECT, J_LARGE_OBJECT, J_SMALL_ARRAY, J_LARGE_ARRAY, J_LITERAL, J_INT16, J_UINT16, J_INT32,
       J_UINT32, J_INT64, J_UINT64, J_DOUBLE, J_STRING, J_OPAQUE = 0xF };
#define MAX_DEPTH 100 /* MySQL's JSON_DOCUMENT_MAX_DEPTH; orjson itself stops at 255 */

/* MySQL column types of opaque values (pymysqlreplication.constants.FIELD_TYPE) */
enum { T_DECIMAL = 0, T_DATE = 10, T_TIME = 11, T_DATETIME = 12, T_DATETIME2 = 18, T_TIME2 = 19, T_NEWDECIMAL = 246 };

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
static int put_double(Buf *doc, double v, PyObject *dumps) {
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

/* An opaque DECIMAL (precision, scale, MySQL's binary DECIMAL) as _json_ready makes it: int(d) when it is
 * integral (64 bits, or orjson refuses it), else float(d). */
static int put_json_decimal(Buf *doc, const unsigned char *p, Py_ssize_t n, PyObject *dumps) {
    if (n < 2) return bad("a DECIMAL without precision and scale");
    long precision = p[0], scale = p[1];
    if (precision < 1 || precision > 65 || scale > 30 || scale > precision || decimal_size(precision, scale) > n - 2)
        return bad("a DECIMAL of a bad precision, scale or size");
    Buf text = {0};
    int rc = -1;
    if (put_decimal(&text, p + 2, precision, scale) < 0 || buf_put(&text, "", 1) < 0) goto done;
    char *s = text.data + 1; /* put_decimal's text is quoted: "-123.4500" */
    text.data[text.len - 2] = '\0';
    char *dot = strchr(s, '.');
    int integral = 1;
    for (char *f = dot ? dot + 1 : s + strlen(s); *f; f++) integral &= *f == '0';
    if (!integral) {
        double v = PyOS_string_to_double(s, NULL, NULL); /* correctly rounded, as float(Decimal) */
        if (v == -1.0 && PyErr_Occurred()) goto done;
        rc = put_double(doc, v, dumps);
        goto done;
    }
    int negative = *s == '-';
    uint64_t v = 0;
    for (char *d = s + negative; *d && *d != '.'; d++) {
        uint64_t digit = (uint64_t)(*d - '0');
        if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && digit > UINT64_MAX % 10)) {
            bad("an integral DECIMAL past 64 bits");
            goto done;
        }
        v = v * 10 + digit;
    }
    if (negative && v > (uint64_t)1 << 63) { bad("an integral DECIMAL past 64 bits"); goto done; }
    rc = negative && v ? put_signed(doc, (int64_t)((uint64_t)0 - v)) : put_unsigned(doc, v);
done:
    PyMem_Free(text.data);
    return rc;
}

/* The packed int64 of an opaque TIME or DATE/DATETIME, its sign dropped (as the library drops it). */
static int packed(const unsigned char *p, Py_ssize_t n, uint64_t *v) {
    if (n < 8) return bad("a packed time shorter than 8 bytes");
    int64_t raw = (int64_t)le(p, 8);
    *v = raw < 0 ? (uint64_t)0 - (uint64_t)raw : (uint64_t)raw;
    if (!PyDateTimeAPI) PyDateTime_IMPORT; /* this file's own copy of the datetime C API */
    return PyDateTimeAPI ? 0 : -1;
}

/* An opaque TIME as decode_time's datetime.time, through orjson itself: orjson 3.13 writes a time's
 * microseconds 10000-99999 with five digits ("00:00:00.10000" for 0.01 s), and the lines must be the Python path's. */
static int put_json_time(Buf *doc, const unsigned char *p, Py_ssize_t n, PyObject *dumps) {
    uint64_t v;
    if (packed(p, n, &v) < 0) return -1;
    uint64_t whole = v >> 24, hour = (whole >> 12) % 1024, micro = v % (1 << 24);
    return put_dumped(doc, PyTime_FromTime((int)hour, (int)((whole >> 6) % 64), (int)(whole % 64), (int)micro), dumps);
}

/* An opaque DATE/DATETIME as decode_datetime's value: the string "0000-00-00 00:00:00" for 0 (`*zero` set, its
 * text unquoted), else a datetime (its constructor checks the date), through orjson itself. */
static int put_json_datetime(Buf *doc, const unsigned char *p, Py_ssize_t n, PyObject *dumps, int *zero) {
    uint64_t v;
    if (packed(p, n, &v) < 0) return -1;
    *zero = v == 0;
    if (*zero) return buf_put(doc, "0000-00-00 00:00:00", 19);
    uint64_t whole = v >> 24, ymd = whole >> 17, ym = ymd >> 5, hms = whole % (1 << 17);
    if (ym / 13 > 9999) return bad("a date out of range"); /* before an int conversion could wrap */
    return put_dumped(doc, PyDateTime_FromDateAndTime((int)(ym / 13), (int)(ym % 13), (int)(ymd % 32), (int)(hms >> 12),
                                                      (int)((hms >> 6) % 64), (int)(hms % 64), (int)(v % (1 << 24))),
                      dumps);
}

/* An opaque value (MySQL type, length, bytes) as parse_opaque + _json_ready + orjson give it; `*raw` set when the
 * library's value is a str (its text unquoted in doc: the top of a document shows it so). */
static int put_opaque(Buf *doc, const unsigned char *p, Py_ssize_t avail, PyObject *dumps, int *raw) {
    Py_ssize_t start, n;
    *raw = 0;
    if (avail < 1) return bad("an opaque value without its type");
    if (var_length(p + 1, avail - 1, &start, &n) < 0) return -1;
    int type = p[0];
    const unsigned char *data = p + 1 + start;
    switch (type) {
    case T_NEWDECIMAL: case T_DECIMAL: return put_json_decimal(doc, data, n, dumps);
    case T_TIME: case T_TIME2: return put_json_time(doc, data, n, dumps);
    case T_DATE: case T_DATETIME: case T_DATETIME2: return put_json_datetime(doc, data, n, dumps, raw);
    default:
        *raw = 1; /* data.decode(errors="ignore"): the same as strict on valid UTF-8, which put_text checks */
        return n ? buf_put(doc, (const char *)data, n) : 0;
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
        return put_double(doc, v, dumps);
    }
    case J_STRING: {
        Py_ssize_t start, n;
        if (var_length(p, avail, &start, &n) < 0) return -1;
        return put_text(doc, p + start, n);
    }
    case J_OPAQUE: {
        int raw;
        Py_ssize_t at = doc->len;
        if (put_opaque(doc, p, avail, dumps, &raw) < 0) return -1;
        if (!raw) return 0;
        Buf text = {0}; /* the str quoted and escaped in place of its raw bytes */
        int rc = put_text(&text, (const unsigned char *)doc->data + at, doc->len - at);
        doc->len = at;
        if (rc == 0) rc = buf_put(doc, text.data, text.len);
        PyMem_Free(text.data);
        return rc;
    }
    default: return bad("an unknown value type");
    }
}

/* A JSON column's document (n > 0 bytes: type, value) as its change-log value, the column's JSON text as a string
 * (cdc.values._encode_json), into out. */
int put_json(Buf *out, const unsigned char *p, Py_ssize_t n, PyObject *dumps) {
    Buf doc = {0};
    int rc = -1, type = p[0];
    const unsigned char *value = p + 1;
    Py_ssize_t avail = n - 1;
    if (type == J_LITERAL && avail >= 1 && value[0] == 0) return buf_put(out, "null", 4); /* None: the column's null */
    if (type == J_STRING) { /* bytes: _encode_json decodes them as the text itself */
        Py_ssize_t start, length;
        if (var_length(value, avail, &start, &length) < 0) goto done;
        rc = put_text(out, value + start, length);
        goto done;
    }
    if (type == J_OPAQUE) {
        int raw;
        if (put_opaque(&doc, value, avail, dumps, &raw) < 0) goto done;
    } else if (put_value(&doc, type, value, avail, 1, dumps) < 0) {
        goto done;
    }
    rc = put_text(out, (const unsigned char *)doc.data, doc.len);
done:
    PyMem_Free(doc.data);
    return rc;
}
