/* The snapshot's row reader in C: text-protocol row packets -> finished change-log lines.
 *
 * It does what the `parse` function cdc/snapshot/lines.py generates per table does (that
 * Python loop cost ~2 us a row, 0.2-0.36 of mariadb-dump's rows/s: issue 8), following a column
 * program compile_table builds once per table: per column one action (integer digits as they are,
 * quoted text as it is, temporal text padded, text validated and escaped, binary in base64, an
 * excluded column read past, ZEROFILL/YEAR digits without their leading zeros, BIT as a number, FLOAT
 * as the shortest decimal that round-trips its 4-byte value, or
 * a call of the column's Python fragment for everything else and for any value these are not sure of;
 * a SET's fragments are kept per distinct value).
 *
 * Exactness rule: whenever a row holds anything this code is not sure of (a malformed packet, a
 * value running past its packet, invalid UTF-8, a Python fragment that raised), it stops and hands
 * the buffer, from that row's packet on, to the generated Python `parse` (the fallback). So lines
 * and errors (RowEncodeError, its row number and cause) are always the Python reader's own.
 *
 * Rows of a prepared statement (the binary protocol, cdc/snapshot/binary.py) are first turned into the text
 * rows the server would have sent (_native_binary.c), then read the same way; a row this code is not sure of
 * goes, as text, to the generated Python `row`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../_native_floats.h"
#include "_native_binary.h"

/* Raised when this file changes what the Python side must pass or may expect (native.py). */
#define ABI_VERSION 7

enum action {
    A_RAW, A_QUOTED, A_TEMPORAL, A_TIMESTAMP, A_TEXT, A_BASE64, A_SKIP, A_PYTHON,
    A_INTEGER_TEXT, /* b'%d' % int(v): leading zeros dropped (ZEROFILL, YEAR) */
    A_BIT,          /* b'%d' % int.from_bytes(v, 'big') */
    A_CACHED,       /* PYTHON, its fragments kept per distinct value (SET: few distinct values, a costly encoder) */
    A_FLOAT32,      /* FLOAT (read as DOUBLE text): the shortest decimal that round-trips the 4-byte float */
    A_COUNT
};
#define SLOT_ROW_PADDED (-1) /* %012d of the row number */
#define SLOT_ROW (-2)        /* %d of the row number */
#define MAX_PACKET 0xFFFFFF
#define CACHE_MAX 256 /* distinct values kept per CACHED column: memory stays bounded */

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;
    unsigned char *actions;
    PyObject *suffixes;  /* tuple of bytes: what ends a TEMPORAL/TIMESTAMP value (padding, Z, quote) */
    PyObject *fragments; /* tuple: the Python fragment function of a PYTHON column, else None */
    PyObject *literals;  /* tuple of nslots + 1 bytes: the line's fixed pieces */
    Py_ssize_t nslots;
    Py_ssize_t *slots;   /* per slot: a column index, SLOT_ROW_PADDED or SLOT_ROW */
    Py_ssize_t literal_len; /* the literals' total length */
    double growth;       /* bytes of lines per byte of row packets, as last seen */
    PyObject *fallback;  /* the generated Python parse(buf, p, end, n, seq, out) */
    PyObject *caches;    /* tuple: a CACHED column's dict (value bytes -> fragment), else None */
    WireType *wire;      /* set_binary(): the columns of binary rows, else NULL */
    unsigned char *binary_actions; /* set_binary(): actions, with RAW for DOUBLEs made JSON by binary_to_text */
    PyObject *row;       /* set_binary(): the generated Python row(payload, n), for rows handed over */
    TextRow scratch;     /* the text row of the binary row being read */
} Reader;

typedef struct {
    const unsigned char *data;
    Py_ssize_t len;     /* bytes of the value in the packet */
    Py_ssize_t out_len; /* bytes of its JSON in the line */
    PyObject *obj;      /* a PYTHON column's fragment (owned until the line is built) */
    int is_null;
    char digits[32];    /* INTEGER_TEXT's sign, BIT's decimal, FLOAT32's JSON number */
} Value;

static const char HEX[] = "0123456789abcdef";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* orjson's escape of an ASCII byte: 0 = as is, a letter = backslash + letter, 'u' = \u00XX. */
static unsigned char ESCAPE[128];

static void init_escapes(void)
{
    for (int c = 0; c < 0x20; c++)
        ESCAPE[c] = 'u';
    ESCAPE['\b'] = 'b';
    ESCAPE['\t'] = 't';
    ESCAPE['\n'] = 'n';
    ESCAPE['\f'] = 'f';
    ESCAPE['\r'] = 'r';
    ESCAPE['"'] = '"';
    ESCAPE['\\'] = '\\';
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether any of the 8 bytes in w is >= 0x80, < 0x20, '"' or '\\': anything text_length must look at.
 * A zero byte test ((x - ONES) & ~x & HIGHS) never misses one; it may flag a byte after a real hit,
 * which only sends that word to the byte loop. */
static int needs_care(uint64_t w)
{
    uint64_t quote = w ^ (ONES * '"'), backslash = w ^ (ONES * '\\');
    uint64_t control = (w - ONES * 0x20) & ~w;
    uint64_t flagged = control | ((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash);
    return ((flagged | w) & HIGHS) != 0;
}

/* Bytes of the JSON string body of UTF-8 text s[0:n] (no quotes), or -1 if s is not strict UTF-8
 * as Python's decoder sees it (no overlongs, no surrogates, nothing above U+10FFFF). */
static Py_ssize_t text_length(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t out = n, i = 0;
    while (i < n) {
        /* Most text is plain ASCII: 8 bytes a step (a third of the reader's time on wide tables went to
         * this loop byte by byte). */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (needs_care(w))
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = s[i];
        if (c < 0x80) {
            unsigned char e = ESCAPE[c];
            out += e == 0 ? 0 : (e == 'u' ? 5 : 1);
            i++;
            continue;
        }
        unsigned char lo = 0x80, hi = 0xBF;
        int more;
        if (c < 0xC2)
            return -1;
        else if (c < 0xE0)
            more = 1;
        else if (c < 0xF0) {
            more = 2;
            if (c == 0xE0)
                lo = 0xA0; /* overlong */
            else if (c == 0xED)
                hi = 0x9F; /* surrogates */
        } else if (c < 0xF5) {
            more = 3;
            if (c == 0xF0)
                lo = 0x90; /* overlong */
            else if (c == 0xF4)
                hi = 0x8F; /* above U+10FFFF */
        } else
            return -1;
        if (n - i <= more) /* truncated */
            return -1;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return -1;
        for (int k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return -1;
        i += more + 1;
    }
    return out;
}

static char *write_text(char *w, const unsigned char *s, Py_ssize_t n, Py_ssize_t body)
{
    if (body == n) { /* nothing to escape */
        memcpy(w, s, n);
        return w + n;
    }
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x80 || ESCAPE[c] == 0)
            continue;
        memcpy(w, s + run, i - run);
        w += i - run;
        run = i + 1;
        *w++ = '\\';
        if (ESCAPE[c] == 'u') {
            memcpy(w, "u00", 3);
            w[3] = HEX[c >> 4];
            w[4] = HEX[c & 15];
            w += 5;
        } else
            *w++ = (char)ESCAPE[c];
    }
    memcpy(w, s + run, n - run);
    return w + (n - run);
}

static char *write_base64(char *w, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        w[0] = B64[v >> 18];
        w[1] = B64[(v >> 12) & 63];
        w[2] = B64[(v >> 6) & 63];
        w[3] = B64[v & 63];
        w += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        w[0] = B64[v >> 18];
        w[1] = B64[(v >> 12) & 63];
        w[2] = w[3] = '=';
        w += 4;
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        w[0] = B64[v >> 18];
        w[1] = B64[(v >> 12) & 63];
        w[2] = B64[(v >> 6) & 63];
        w[3] = '=';
        w += 4;
    }
    return w;
}

/* %d of an unsigned value into w (snprintf cost more than the rest of a narrow row's numbers); its length. */
static int format_unsigned(char *w, unsigned long long v)
{
    char digits[24];
    int count = 0;
    do {
        digits[count++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int k = 0; k < count; k++)
        w[k] = digits[count - 1 - k];
    return count;
}

/* %d of a row number. */
static int format_row(char *w, long long n)
{
    return n < 0 ? snprintf(w, 32, "%lld", n) : format_unsigned(w, (unsigned long long)n);
}

/* int(v) printed, for plain [-]digits: the leading zeros are dropped by pointing v->data past them
 * (v->digits[0] holds the sign). 0, or -1 when v is not plain digits: Python's int() decides then. */
static int integer_text(Value *v)
{
    const unsigned char *s = v->data;
    Py_ssize_t n = v->len, k = 0;
    int negative = n > 0 && s[0] == '-';
    k = negative;
    if (k == n)
        return -1;
    for (Py_ssize_t j = k; j < n; j++)
        if (s[j] < '0' || s[j] > '9')
            return -1;
    while (k < n - 1 && s[k] == '0')
        k++;
    if (s[k] == '0')
        negative = 0; /* -0 is 0 */
    v->data = s + k;
    v->digits[0] = negative ? '-' : '+';
    v->out_len = (n - k) + negative;
    return 0;
}

/* Whether orjson writes exponents as json_double does (set_orjson_exponents(), from native.py,
 * which checks orjson at import); if not, values with an exponent go to the column's Python fragment. */
static int orjson_exponents = 0;

static PyObject *set_orjson_exponents(PyObject *Py_UNUSED(module), PyObject *flag)
{
    int truth = PyObject_IsTrue(flag);
    if (truth < 0)
        return NULL;
    orjson_exponents = truth;
    Py_RETURN_NONE;
}

/* The double float() reads from v's text: only [-+0-9.eE] (float() would also take spaces, '_', nan, inf:
 * those go to Python), all of it, finite. 0, or -1 (Python decides). */
static int number_text(const Value *v, double *out)
{
    char text[40];
    if (v->len < 1 || v->len >= (Py_ssize_t)sizeof text)
        return -1;
    for (Py_ssize_t k = 0; k < v->len; k++) {
        unsigned char c = v->data[k];
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'))
            return -1;
    }
    memcpy(text, v->data, v->len);
    text[v->len] = '\0';
    char *end;
    double number = PyOS_string_to_double(text, &end, NULL);
    if (number == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (end != text + v->len || !isfinite(number))
        return -1;
    *out = number;
    return 0;
}

/* A FLOAT column as cdc.values.shortest_float32 and orjson write it, from the server's DOUBLE text of
 * `col + 0E0` (cdc/_native_floats.c, shared with tail's decoder). 0, or -1 for anything else (other text,
 * a float overflow): the column's Python fragment decides. Python's loop cost ~4 us a value, most of a
 * wide table's time in the reader. */
static int float32_text(Value *v)
{
    double number, shortest;
    if (number_text(v, &number) < 0 || shortest_float32(number, &shortest) < 0)
        return -1;
    Py_ssize_t n = json_double(shortest, v->digits, orjson_exponents);
    if (n < 0)
        return -1;
    v->out_len = n;
    return 0;
}

/* Read the length-encoded value at *p of a packet ending at q. 0: read; -1: not sure (hand over). */
static int read_value(const unsigned char *b, Py_ssize_t *p, Py_ssize_t q, Value *v)
{
    Py_ssize_t at = *p;
    if (at >= q)
        return -1;
    unsigned char c = b[at];
    uint64_t len;
    int width;
    v->is_null = 0;
    if (c < 251) {
        len = c;
        width = 0;
    } else if (c == 251) {
        v->is_null = 1;
        v->len = 0;
        *p = at + 1;
        return 0;
    } else if (c >= 0xFC && c <= 0xFE) {
        width = c == 0xFC ? 2 : (c == 0xFD ? 3 : 8);
        if (q - at - 1 < width)
            return -1;
        len = 0;
        for (int k = width; k >= 1; k--)
            len = len << 8 | b[at + k];
    } else
        return -1;
    at += 1 + width;
    if (len > (uint64_t)(q - at))
        return -1;
    v->data = b + at;
    v->len = (Py_ssize_t)len;
    *p = at + (Py_ssize_t)len;
    return 0;
}

/* Work out column i's JSON length (calling its Python fragment if it has one). 0, or -1: hand over. */
static int measure(Reader *self, Py_ssize_t i, Value *v)
{
    v->obj = NULL;
    if (v->is_null) {
        v->out_len = 4;
        return 0;
    }
    switch (self->actions[i]) {
    case A_RAW:
        v->out_len = v->len;
        return 0;
    case A_QUOTED:
        v->out_len = v->len + 2;
        return 0;
    case A_TEMPORAL:
    case A_TIMESTAMP:
        v->out_len = v->len + 1 + PyBytes_GET_SIZE(PyTuple_GET_ITEM(self->suffixes, i));
        return 0;
    case A_TEXT: {
        Py_ssize_t body = text_length(v->data, v->len);
        v->out_len = body + 2;
        return body < 0 ? -1 : 0;
    }
    case A_BASE64:
        v->out_len = (v->len + 2) / 3 * 4 + 2;
        return 0;
    case A_SKIP:
        v->out_len = 0;
        return 0;
    case A_INTEGER_TEXT:
        if (integer_text(v) == 0)
            return 0;
        break; /* not plain digits: Python's int() decides */
    case A_FLOAT32:
        if (float32_text(v) == 0)
            return 0;
        break;
    case A_BIT:
        if (v->len <= 8) {
            unsigned long long bits = 0;
            for (Py_ssize_t k = 0; k < v->len; k++)
                bits = bits << 8 | v->data[k];
            v->out_len = format_unsigned(v->digits, bits);
            return 0;
        }
        break;
    default:
        break;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)v->data, v->len);
    if (raw == NULL)
        return -2;
    PyObject *cache = PyTuple_GET_ITEM(self->caches, i);
    if (cache != Py_None) {
        v->obj = PyDict_GetItemWithError(cache, raw); /* borrowed */
        if (v->obj != NULL) {
            Py_INCREF(v->obj);
            Py_DECREF(raw);
            v->out_len = PyBytes_GET_SIZE(v->obj);
            return 0;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(raw);
            return -2;
        }
    }
    v->obj = PyObject_CallOneArg(PyTuple_GET_ITEM(self->fragments, i), raw);
    if (v->obj == NULL) {
        Py_DECREF(raw);
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -2; /* KeyboardInterrupt and the like: not a value's fault */
        PyErr_Clear(); /* the Python reader meets the same error and raises it as it always did */
        return -1;
    }
    if (!PyBytes_CheckExact(v->obj)) {
        Py_DECREF(raw);
        Py_CLEAR(v->obj);
        return -1;
    }
    /* Only values whose fragment succeeded are kept: an error is always the Python reader's to raise. */
    int kept = cache != Py_None && PyDict_GET_SIZE(cache) < CACHE_MAX ? PyDict_SetItem(cache, raw, v->obj) : 0;
    Py_DECREF(raw);
    if (kept < 0) {
        Py_CLEAR(v->obj);
        return -2;
    }
    v->out_len = PyBytes_GET_SIZE(v->obj);
    return 0;
}

static char *write_value(Reader *self, Py_ssize_t i, const Value *v, char *w)
{
    if (v->is_null) {
        memcpy(w, "null", 4);
        return w + 4;
    }
    switch (self->actions[i]) {
    case A_RAW:
        memcpy(w, v->data, v->len);
        return w + v->len;
    case A_QUOTED:
        *w++ = '"';
        memcpy(w, v->data, v->len);
        w += v->len;
        *w++ = '"';
        return w;
    case A_TEMPORAL:
    case A_TIMESTAMP: {
        PyObject *suffix = PyTuple_GET_ITEM(self->suffixes, i);
        *w++ = '"';
        memcpy(w, v->data, v->len);
        if (self->actions[i] == A_TIMESTAMP) /* as bytes.replace(b' ', b'T') */
            for (Py_ssize_t k = 0; k < v->len; k++)
                if (w[k] == ' ')
                    w[k] = 'T';
        w += v->len;
        memcpy(w, PyBytes_AS_STRING(suffix), PyBytes_GET_SIZE(suffix));
        return w + PyBytes_GET_SIZE(suffix);
    }
    case A_TEXT:
        *w++ = '"';
        w = write_text(w, v->data, v->len, v->out_len - 2);
        *w++ = '"';
        return w;
    case A_BASE64:
        *w++ = '"';
        w = write_base64(w, v->data, v->len);
        *w++ = '"';
        return w;
    case A_SKIP:
        return w;
    default:
        break;
    }
    if (v->obj == NULL) { /* INTEGER_TEXT, BIT or FLOAT32 done here */
        if (self->actions[i] == A_BIT || self->actions[i] == A_FLOAT32) {
            memcpy(w, v->digits, v->out_len);
            return w + v->out_len;
        }
        if (v->digits[0] == '-')
            *w++ = '-';
        memcpy(w, v->data, v->out_len - (v->digits[0] == '-'));
        return w + v->out_len - (v->digits[0] == '-');
    }
    {
        memcpy(w, PyBytes_AS_STRING(v->obj), v->out_len);
        return w + v->out_len;
    }
}

static void release(Value *values, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++)
        Py_CLEAR(values[i].obj);
}

/* The lines of one parse call, written straight into one bytes object: a bytes object per line and
 * their join cost more than the rest of the loop (benchmarks/bench_snapshot.py --profile). */
typedef struct {
    PyObject *bytes; /* NULL until the first line */
    Py_ssize_t used, cap;
} Block;

/* Room for `need` more bytes; 0, or -1 with an error set. */
static int reserve(Block *block, Py_ssize_t need, Py_ssize_t hint)
{
    if (block->bytes != NULL && block->used + need <= block->cap)
        return 0;
    Py_ssize_t cap = block->cap * 2 > hint ? block->cap * 2 : hint;
    if (cap < block->used + need)
        cap = block->used + need;
    if (block->bytes == NULL)
        block->bytes = PyBytes_FromStringAndSize(NULL, cap);
    else if (_PyBytes_Resize(&block->bytes, cap) < 0)
        return -1;
    if (block->bytes == NULL)
        return -1;
    block->cap = cap;
    return 0;
}

/* Append the block (trimmed) to out, if it holds any line; 0, or -1 with an error set. */
static int flush(Block *block, PyObject *out)
{
    if (block->bytes == NULL)
        return 0;
    int status = _PyBytes_Resize(&block->bytes, block->used);
    if (status == 0)
        status = PyList_Append(out, block->bytes);
    Py_CLEAR(block->bytes);
    block->used = block->cap = 0;
    return status;
}

/* Write the finished line of one row whose values are all measured; 0, or -1 with an error set. */
static int write_line(Reader *self, const Value *values, long long n, Block *block, Py_ssize_t hint)
{
    char padded[32], plain[32];
    int plain_len = format_row(plain, n);
    int padded_len = plain_len;
    memcpy(padded, plain, plain_len);
    if (n >= 0 && plain_len < 12) { /* %012d: zeros in front */
        padded_len = 12;
        memset(padded, '0', 12 - plain_len);
        memcpy(padded + 12 - plain_len, plain, plain_len);
    } else if (n < 0)
        padded_len = snprintf(padded, sizeof padded, "%012lld", n);
    Py_ssize_t total = self->literal_len;
    for (Py_ssize_t k = 0; k < self->nslots; k++) {
        Py_ssize_t slot = self->slots[k];
        total += slot == SLOT_ROW_PADDED ? padded_len : (slot == SLOT_ROW ? plain_len : values[slot].out_len);
    }
    if (reserve(block, total, hint) < 0)
        return -1;
    char *w = PyBytes_AS_STRING(block->bytes) + block->used;
    block->used += total;
    for (Py_ssize_t k = 0;; k++) {
        PyObject *literal = PyTuple_GET_ITEM(self->literals, k);
        memcpy(w, PyBytes_AS_STRING(literal), PyBytes_GET_SIZE(literal));
        w += PyBytes_GET_SIZE(literal);
        if (k == self->nslots)
            return 0;
        Py_ssize_t slot = self->slots[k];
        if (slot == SLOT_ROW_PADDED) {
            memcpy(w, padded, padded_len);
            w += padded_len;
        } else if (slot == SLOT_ROW) {
            memcpy(w, plain, plain_len);
            w += plain_len;
        } else
            w = write_value(self, slot, &values[slot], w);
    }
}

/* Read and measure every value of the row packet b[p:q]: 0, -1 (hand over) or -2 (an error is set). */
static int read_row(Reader *self, const unsigned char *b, Py_ssize_t p, Py_ssize_t q, Value *values)
{
    for (Py_ssize_t i = 0; i < self->ncols; i++) {
        values[i].obj = NULL;
        int status = read_value(b, &p, q, &values[i]);
        if (status == 0)
            status = measure(self, i, &values[i]);
        if (status != 0) {
            release(values, i);
            return status;
        }
    }
    if (p != q) {
        release(values, self->ncols);
        return -1;
    }
    return 0;
}

static PyObject *hand_over(Reader *self, PyObject *buf, Py_ssize_t p, Py_ssize_t end, long long n, int seq,
                           PyObject *out)
{
    return PyObject_CallFunction(self->fallback, "OnnLiO", buf, p, end, n, seq, out);
}


/* Append a line the Python `row` made to the block; 0, or -1 with an error set. */
static int append_line(Block *block, PyObject *line, Py_ssize_t hint)
{
    if (!PyBytes_Check(line)) {
        PyErr_SetString(PyExc_TypeError, "row() must return bytes");
        return -1;
    }
    if (reserve(block, PyBytes_GET_SIZE(line), hint) < 0)
        return -1;
    memcpy(PyBytes_AS_STRING(block->bytes) + block->used, PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line));
    block->used += PyBytes_GET_SIZE(line);
    return 0;
}

/* One binary row (made text in self->scratch) into the block; 0, or -1 with an error set. */
static int binary_row(Reader *self, const unsigned char *payload, Py_ssize_t size, long long n, Value *values,
                      Block *block, Py_ssize_t hint)
{
    int status = binary_to_text(payload, size, self->wire, self->ncols, orjson_exponents ? 2 : 1, &self->scratch);
    if (status < 0)
        return -1;
    if (status == 0) {
        unsigned char *text_actions = self->actions;
        self->actions = self->binary_actions;
        int read = read_row(self, self->scratch.data, 0, self->scratch.len, values); /* 0, -1 not sure, -2 */
        int written = 0;
        if (read == 0) {
            written = write_line(self, values, n, block, hint);
            release(values, self->ncols);
        }
        self->actions = text_actions;
        if (read == -2 || written < 0)
            return -1;
        if (read == 0)
            return 0;
    }
    /* A DOUBLE not written as JSON, or a value read_row is not sure of: the server's text of the whole row,
     * made into a line (or its error) by the Python reader. */
    if (binary_to_text(payload, size, self->wire, self->ncols, 0, &self->scratch) < 0)
        return -1;
    PyObject *line = PyObject_CallFunction(self->row, "y#L", (const char *)self->scratch.data, self->scratch.len, n);
    if (line == NULL)
        return -1;
    status = append_line(block, line, hint);
    Py_DECREF(line);
    return status;
}

/* The row packets of buf[p:end] -> lines appended to out, until a packet this does not take (incomplete, out
 * of sequence, 16 MiB or more, EOF, ERR); (p, n, seq) where it stopped. Text rows: a row this is not sure of
 * hands the buffer from there to the Python parse. Binary rows (`binary`): see binary_row. */
static PyObject *parse_packets(Reader *self, PyObject *args, int binary)
{
    PyObject *buf, *out;
    Py_ssize_t p, end;
    long long n;
    int seq;
    if (!PyArg_ParseTuple(args, "OnnLiO!:parse", &buf, &p, &end, &n, &seq, &PyList_Type, &out))
        return NULL;
    if (binary && self->wire == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "parse_binary: set_binary() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    Block block = {NULL, 0, 0};
    Py_ssize_t start = p;
    Value *values = PyMem_Calloc(self->ncols ? self->ncols : 1, sizeof(Value));
    if (values == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (p < 0 || end > view.len || p > end) {
        PyErr_SetString(PyExc_ValueError, "parse: p and end must lie within the buffer");
        goto done;
    }
    /* The block's first size: as many bytes of lines per byte of packets as the last call made. */
    Py_ssize_t hint = (Py_ssize_t)((double)(end - p) * self->growth) + 4096;
    const unsigned char *b = view.buf;
    while (p + 4 < end) {
        Py_ssize_t size = b[p] | b[p + 1] << 8 | b[p + 2] << 16;
        Py_ssize_t q = p + 4 + size;
        if (q > end || size == MAX_PACKET || b[p + 3] != seq || (binary && size == 0))
            break;
        int status = size == 0 ? -1 : 0;
        unsigned char first = status == 0 ? b[p + 4] : 0;
        if (status == 0 && (first == 0xFF || (first == 0xFE && size < 9)))
            break; /* an ERR or EOF packet: the caller's business */
        if (binary) {
            if (binary_row(self, b + p + 4, size, n, values, &block, hint) < 0)
                goto done;
        } else {
            if (status == 0)
                status = read_row(self, b, p + 4, q, values);
            if (status == -1) { /* not sure: the Python reader takes this row and the rest */
                if (flush(&block, out) == 0)
                    result = hand_over(self, buf, p, end, n, seq, out);
                goto done;
            }
            status = status == 0 ? write_line(self, values, n, &block, hint) : status;
            release(values, self->ncols);
            if (status < 0)
                goto done;
        }
        p = q;
        n += 1;
        seq = (seq + 1) & 255;
    }
    if (p > start && block.used > 0)
        self->growth = (double)block.used / (double)(p - start);
    if (flush(&block, out) == 0)
        result = Py_BuildValue("(nLi)", p, n, seq);
done:
    Py_XDECREF(block.bytes);
    PyMem_Free(values);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Reader_parse(Reader *self, PyObject *args)
{
    return parse_packets(self, args, 0);
}

static PyObject *Reader_parse_binary(Reader *self, PyObject *args)
{
    return parse_packets(self, args, 1);
}

static PyObject *Reader_set_binary(Reader *self, PyObject *args)
{
    PyObject *types, *row;
    if (!PyArg_ParseTuple(args, "O!O:set_binary", &PyTuple_Type, &types, &row))
        return NULL;
    if (PyTuple_GET_SIZE(types) != self->ncols || !PyCallable_Check(row)) {
        PyErr_SetString(PyExc_ValueError, "set_binary: one (code, unsigned, decimals, zerofill, json) per column, "
                                          "and row()");
        return NULL;
    }
    WireType *wire = PyMem_Calloc(self->ncols ? self->ncols : 1, sizeof(WireType));
    if (wire == NULL)
        return PyErr_NoMemory();
    unsigned char *actions = PyMem_Malloc(self->ncols ? self->ncols : 1);
    if (actions == NULL) {
        PyMem_Free(wire);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < self->ncols; i++) {
        int code, is_unsigned, decimals, zerofill, json;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(types, i), "iiiip", &code, &is_unsigned, &decimals, &zerofill, &json)) {
            PyMem_Free(wire);
            PyMem_Free(actions);
            return NULL;
        }
        if (!binary_type_known(code, decimals) || zerofill < 0 || zerofill > 0xFFFF) {
            PyMem_Free(wire);
            PyMem_Free(actions);
            return PyErr_Format(PyExc_ValueError, "set_binary: column %zd: field type %d (%d digits) not read", i,
                                code, decimals);
        }
        json = json && code == 5 && self->actions[i] == A_PYTHON; /* a DOUBLE whose fragment is dumps(float(v)) */
        wire[i] = (WireType){(unsigned char)code, (unsigned char)(is_unsigned != 0), (unsigned char)decimals,
                             (unsigned char)json, (unsigned short)zerofill};
        actions[i] = json ? A_RAW : self->actions[i];
    }
    PyMem_Free(self->wire);
    self->wire = wire;
    PyMem_Free(self->binary_actions);
    self->binary_actions = actions;
    Py_INCREF(row);
    Py_XSETREF(self->row, row);
    Py_RETURN_NONE;
}

static PyObject *Reader_to_text(Reader *self, PyObject *payload)
{
    if (self->wire == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "to_text: set_binary() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    if (binary_to_text(view.buf, view.len, self->wire, self->ncols, 0, &self->scratch) == 0)
        result = PyBytes_FromStringAndSize((const char *)self->scratch.data, self->scratch.len);
    PyBuffer_Release(&view);
    return result;
}

static void Reader_dealloc(Reader *self)
{
    PyMem_Free(self->actions);
    PyMem_Free(self->slots);
    Py_XDECREF(self->suffixes);
    Py_XDECREF(self->fragments);
    Py_XDECREF(self->literals);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->caches);
    PyMem_Free(self->wire);
    PyMem_Free(self->binary_actions);
    Py_XDECREF(self->row);
    PyMem_Free(self->scratch.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Reader_methods[] = {
    {"parse", (PyCFunction)Reader_parse, METH_VARARGS,
     "parse(buf, p, end, n, seq, out) -> (p, n, seq): the generated Python parse, in C; the lines of one "
     "call are appended to out as one bytes object."},
    {"parse_binary", (PyCFunction)Reader_parse_binary, METH_VARARGS,
     "parse_binary(buf, p, end, n, seq, out) -> (p, n, seq): parse, for the binary rows of a prepared statement."},
    {"set_binary", (PyCFunction)Reader_set_binary, METH_VARARGS,
     "set_binary(types, row): the binary rows' columns ((code, unsigned, decimals, zerofill, json) each: json, a "
     "DOUBLE written as its JSON number) and the Python row(payload, n) for rows handed over."},
    {"to_text", (PyCFunction)Reader_to_text, METH_O, "to_text(payload) -> the text row of one binary row payload."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc.snapshot._native.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled table's row reader; made by reader().",
    .tp_methods = Reader_methods,
};

/* Check the column program; 0 or -1 with an error set. */
static int check_program(Py_ssize_t ncols, PyObject *actions, PyObject *suffixes, PyObject *fragments,
                         PyObject *literals, PyObject *slots)
{
    if (PyTuple_GET_SIZE(actions) != ncols || PyTuple_GET_SIZE(suffixes) != ncols
        || PyTuple_GET_SIZE(fragments) != ncols || PyTuple_GET_SIZE(literals) != PyTuple_GET_SIZE(slots) + 1) {
        PyErr_SetString(PyExc_ValueError, "reader: actions, suffixes and fragments need one entry per column, "
                                          "literals one more than slots");
        return -1;
    }
    for (Py_ssize_t i = 0; i < ncols; i++) {
        long action = PyLong_AsLong(PyTuple_GET_ITEM(actions, i));
        if (action < 0 || action >= A_COUNT) {
            PyErr_Format(PyExc_ValueError, "reader: column %zd has no action %ld", i, action);
            return -1;
        }
        if (!PyBytes_Check(PyTuple_GET_ITEM(suffixes, i))
            || ((action == A_PYTHON || action == A_INTEGER_TEXT || action == A_BIT || action == A_CACHED
                 || action == A_FLOAT32) && !PyCallable_Check(PyTuple_GET_ITEM(fragments, i)))) {
            PyErr_Format(PyExc_TypeError, "reader: column %zd needs a bytes suffix (and a fragment for its action)", i);
            return -1;
        }
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(literals); k++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(literals, k))) {
            PyErr_SetString(PyExc_TypeError, "reader: literals must be bytes");
            return -1;
        }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) {
        Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, k));
        if (slot < SLOT_ROW || slot >= ncols) {
            PyErr_Format(PyExc_ValueError, "reader: slot %zd refers to nothing (%zd)", k, slot);
            return -1;
        }
    }
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *make_reader(PyObject *module, PyObject *args)
{
    PyObject *actions, *suffixes, *fragments, *literals, *slots, *fallback;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O:reader", &PyTuple_Type, &actions, &PyTuple_Type, &suffixes,
                          &PyTuple_Type, &fragments, &PyTuple_Type, &literals, &PyTuple_Type, &slots, &fallback))
        return NULL;
    Py_ssize_t ncols = PyTuple_GET_SIZE(actions);
    if (check_program(ncols, actions, suffixes, fragments, literals, slots) < 0)
        return NULL;
    Reader *self = PyObject_New(Reader, &ReaderType);
    if (self == NULL)
        return NULL;
    self->wire = NULL;
    self->binary_actions = NULL;
    self->row = NULL;
    self->scratch = (TextRow){NULL, 0, 0};
    self->ncols = ncols;
    self->nslots = PyTuple_GET_SIZE(slots);
    self->actions = PyMem_Malloc(ncols ? ncols : 1);
    self->slots = PyMem_Malloc((self->nslots ? self->nslots : 1) * sizeof(Py_ssize_t));
    Py_INCREF(suffixes);
    self->suffixes = suffixes;
    Py_INCREF(fragments);
    self->fragments = fragments;
    Py_INCREF(literals);
    self->literals = literals;
    Py_INCREF(fallback);
    self->fallback = fallback;
    self->caches = PyTuple_New(ncols);
    for (Py_ssize_t i = 0; self->caches != NULL && i < ncols; i++) {
        PyObject *cache = PyLong_AsLong(PyTuple_GET_ITEM(actions, i)) == A_CACHED ? PyDict_New() : Py_NewRef(Py_None);
        if (cache == NULL) {
            Py_DECREF(self);
            return NULL;
        }
        PyTuple_SET_ITEM(self->caches, i, cache);
    }
    if (self->actions == NULL || self->slots == NULL || self->caches == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < ncols; i++)
        self->actions[i] = (unsigned char)PyLong_AsLong(PyTuple_GET_ITEM(actions, i));
    for (Py_ssize_t k = 0; k < self->nslots; k++)
        self->slots[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, k));
    self->literal_len = 0;
    for (Py_ssize_t k = 0; k <= self->nslots; k++)
        self->literal_len += PyBytes_GET_SIZE(PyTuple_GET_ITEM(literals, k));
    self->growth = 4.0;
    return (PyObject *)self;
}

static PyMethodDef module_methods[] = {
    {"reader", make_reader, METH_VARARGS,
     "reader(actions, suffixes, fragments, literals, slots, fallback) -> Reader (see native.py)."},
    {"set_orjson_exponents", set_orjson_exponents, METH_O,
     "set_orjson_exponents(flag): whether FLOAT32 writes values with an exponent (else Python does)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native", "The snapshot's row reader in C (cdc.snapshot.native).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    init_escapes();
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    static const struct {
        const char *name;
        int value;
    } constants[] = {
        {"ABI_VERSION", ABI_VERSION}, {"RAW", A_RAW}, {"QUOTED", A_QUOTED}, {"TEMPORAL", A_TEMPORAL},
        {"TIMESTAMP", A_TIMESTAMP}, {"TEXT", A_TEXT}, {"BASE64", A_BASE64}, {"SKIP", A_SKIP}, {"PYTHON", A_PYTHON},
        {"INTEGER_TEXT", A_INTEGER_TEXT}, {"BIT", A_BIT}, {"CACHED", A_CACHED}, {"FLOAT32", A_FLOAT32},
        {"SLOT_ROW_PADDED", SLOT_ROW_PADDED}, {"SLOT_ROW", SLOT_ROW},
    };
    for (size_t k = 0; k < sizeof constants / sizeof constants[0]; k++)
        if (PyModule_AddIntConstant(module, constants[k].name, constants[k].value) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    return module;
}
