/* The merge's table facts from change lines, in C: what cdc.spark.scan.local_stats counts, ~10x faster.
 *
 * A Scanner is fed whole lines (a file's bytes cut after a newline) and keeps, per (db, table), the row
 * changes' count, their updates+deletes, their lowest and highest position, and the highest position of
 * any line it counted. It decodes only the fields it needs and validates the rest as strict JSON.
 *
 * Exactness rule: a line is counted here only when this code is sure of it: one JSON object, every string
 * valid UTF-8 with no surrogate escape, no key escaped or repeated among the read ones, plain-string
 * `db`/`table`/`position` (no escape) and a row op (c/u/d/r), numbers short enough for any reader. Every
 * other line (DDL, a damaged or unusual line, a blank one) is handed back as "special" and the Python
 * path (orjson, the reference) counts or refuses it. The facts are order-free (counts, minima, maxima),
 * so the two parts add up to the Python path's whole.
 *
 * feed() runs without the interpreter lock: one Scanner per file, several files at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Raised when this file changes what the Python side must pass or may expect (cdc/spark/scan.py). */
#define ABI_VERSION 1
#define POS_MAX 64   /* positions are 37 bytes (docs/formats.md); a longer one goes to Python */
#define MAX_DEPTH 64 /* deeper nesting goes to Python (orjson's limit is higher) */
#define MAX_NUMBER 18 /* a longer number token goes to Python: readers differ on huge numbers */

typedef const unsigned char *cursor;

enum kind { ABSENT, STRING, ESCAPED, OTHER };

typedef struct {
    cursor p;
    Py_ssize_t n;
    int kind;
} field;

enum { F_DB, F_TABLE, F_OP, F_POSITION, F_COUNT };

typedef struct {
    char *name; /* db, NUL, table */
    Py_ssize_t db_n, table_n;
    uint64_t hash;
    long long rows, removals;
    unsigned char low[POS_MAX], high[POS_MAX], last[POS_MAX];
    Py_ssize_t low_n, high_n, last_n;
} table;

typedef struct {
    PyObject_HEAD
    unsigned char upto[POS_MAX];
    Py_ssize_t upto_n; /* -1: no merged_upto */
    table *tables;
    Py_ssize_t n_tables, cap_tables;
    Py_ssize_t *slots; /* hash index: table number + 1, 0 empty */
    Py_ssize_t n_slots;
    Py_ssize_t last_hit;
    Py_ssize_t *special; /* (line index, start, end) triples of the last feed */
    Py_ssize_t n_special, cap_special;
    int busy;
} Scanner;

/* ---- strict JSON, validated, nothing built ---- */

static cursor skip_ws(cursor p, cursor end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

static int hex4(cursor p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

/* One UTF-8 sequence starting at p (a byte >= 0x80): its length, 0 if invalid (overlong, surrogate, > U+10FFFF). */
static int utf8_length(cursor p, cursor end)
{
    unsigned c = p[0];
    Py_ssize_t left = end - p;
#define CONT(i) (left > (i) && (p[i] & 0xC0) == 0x80)
    if (c >= 0xC2 && c <= 0xDF) return CONT(1) ? 2 : 0;
    if (c == 0xE0) return left > 2 && p[1] >= 0xA0 && p[1] <= 0xBF && CONT(2) ? 3 : 0;
    if (c == 0xED) return left > 2 && p[1] >= 0x80 && p[1] <= 0x9F && CONT(2) ? 3 : 0;
    if (c >= 0xE1 && c <= 0xEF) return CONT(1) && CONT(2) ? 3 : 0;
    if (c == 0xF0) return left > 3 && p[1] >= 0x90 && p[1] <= 0xBF && CONT(2) && CONT(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return CONT(1) && CONT(2) && CONT(3) ? 4 : 0;
    if (c == 0xF4) return left > 3 && p[1] >= 0x80 && p[1] <= 0x8F && CONT(2) && CONT(3) ? 4 : 0;
    return 0;
#undef CONT
}

/* A string whose opening quote is at p[-1]: the byte after its closing quote, NULL if not sure of it.
 * *escaped: whether it holds an escape (its bytes are then not its value). */
static cursor skip_string(cursor p, cursor end, int *escaped)
{
    while (p < end) {
        unsigned c = *p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= end) return NULL;
            c = p[1];
            if (c == 'u') {
                unsigned v;
                if (end - p < 6 || !hex4(p + 2, &v) || (v >= 0xD800 && v <= 0xDFFF)) return NULL;
                p += 6;
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
                p += 2;
            } else {
                return NULL;
            }
        } else if (c >= 0x80) {
            int n = utf8_length(p, end);
            if (!n) return NULL;
            p += n;
        } else {
            p++;
        }
    }
    return NULL;
}

static cursor skip_number(cursor p, cursor end)
{
    cursor start = p;
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < end && *p >= '0' && *p <= '9') p++;
    else return NULL;
    if (p < end && *p == '.') {
        cursor digits = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits) return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        cursor digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits || p - digits > 2) return NULL; /* 1e999: readers differ (inf, an error) */
    }
    return p - start > MAX_NUMBER ? NULL : p;
}

static cursor skip_value(cursor p, cursor end, int depth);

/* An object or array whose opening bracket is at p[-1]. */
static cursor skip_container(cursor p, cursor end, int depth, unsigned char close)
{
    if (depth > MAX_DEPTH) return NULL;
    p = skip_ws(p, end);
    if (p < end && *p == close) return p + 1;
    for (;;) {
        if (close == '}') {
            int escaped = 0;
            if (p >= end || *p != '"' || !(p = skip_string(p + 1, end, &escaped))) return NULL;
            p = skip_ws(p, end);
            if (p >= end || *p != ':') return NULL;
            p = skip_ws(p + 1, end);
        }
        if (!(p = skip_value(p, end, depth + 1))) return NULL;
        p = skip_ws(p, end);
        if (p >= end) return NULL;
        if (*p == close) return p + 1;
        if (*p != ',') return NULL;
        p = skip_ws(p + 1, end);
    }
}

static cursor skip_literal(cursor p, cursor end, const char *word, size_t n)
{
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

static cursor skip_value(cursor p, cursor end, int depth)
{
    int escaped = 0;
    if (p >= end) return NULL;
    switch (*p) {
    case '"': return skip_string(p + 1, end, &escaped);
    case '{': return skip_container(p + 1, end, depth, '}');
    case '[': return skip_container(p + 1, end, depth, ']');
    case 't': return skip_literal(p, end, "true", 4);
    case 'f': return skip_literal(p, end, "false", 5);
    case 'n': return skip_literal(p, end, "null", 4);
    default: return skip_number(p, end);
    }
}

static int wanted(cursor key, Py_ssize_t n)
{
    switch (n) {
    case 2: return memcmp(key, "db", 2) == 0 ? F_DB : memcmp(key, "op", 2) == 0 ? F_OP : -1;
    case 5: return memcmp(key, "table", 5) == 0 ? F_TABLE : -1;
    case 8: return memcmp(key, "position", 8) == 0 ? F_POSITION : -1;
    default: return -1;
    }
}

/* One line's read fields; 0 if it must go to Python (not one sure JSON object). */
static int read_line(cursor p, cursor end, field *fields)
{
    memset(fields, 0, sizeof(field) * F_COUNT);
    p = skip_ws(p, end);
    if (p >= end || *p != '{') return 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') return skip_ws(p + 1, end) == end;
    for (;;) {
        int escaped = 0;
        if (p >= end || *p != '"') return 0;
        cursor key = p + 1;
        if (!(p = skip_string(key, end, &escaped)) || escaped) return 0;
        int which = wanted(key, p - 1 - key);
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return 0;
        p = skip_ws(p + 1, end);
        cursor value = p;
        escaped = 0;
        if (!(p = *p == '"' ? skip_string(p + 1, end, &escaped) : skip_value(p, end, 1))) return 0;
        if (which >= 0) {
            field *f = &fields[which];
            if (f->kind != ABSENT) return 0; /* a repeated key: which one counts is the reader's choice */
            f->kind = *value != '"' ? OTHER : escaped ? ESCAPED : STRING;
            f->p = value + 1;
            f->n = p - value - 2;
        }
        p = skip_ws(p, end);
        if (p >= end) return 0;
        if (*p == '}') return skip_ws(p + 1, end) == end;
        if (*p != ',') return 0;
        p = skip_ws(p + 1, end);
    }
}

/* ---- the per-table facts ---- */

static int compare(cursor a, Py_ssize_t a_n, cursor b, Py_ssize_t b_n)
{
    int c = memcmp(a, b, (size_t)(a_n < b_n ? a_n : b_n));
    return c ? c : (a_n > b_n) - (a_n < b_n);
}

static uint64_t name_hash(const field *db, const field *tb)
{
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < db->n; i++) h = (h ^ db->p[i]) * 1099511628211ULL;
    h *= 1099511628211ULL; /* the NUL between the names */
    for (Py_ssize_t i = 0; i < tb->n; i++) h = (h ^ tb->p[i]) * 1099511628211ULL;
    return h;
}

static int same_table(const table *t, const field *db, const field *tb)
{
    return t->db_n == db->n && t->table_n == tb->n && memcmp(t->name, db->p, (size_t)db->n) == 0
        && memcmp(t->name + db->n + 1, tb->p, (size_t)tb->n) == 0;
}

static int reindex(Scanner *s, Py_ssize_t n_slots)
{
    Py_ssize_t *slots = PyMem_RawCalloc((size_t)n_slots, sizeof(Py_ssize_t));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < s->n_tables; i++) {
        Py_ssize_t at = (Py_ssize_t)(s->tables[i].hash & (uint64_t)(n_slots - 1));
        while (slots[at]) at = (at + 1) & (n_slots - 1);
        slots[at] = i + 1;
    }
    PyMem_RawFree(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
    return 0;
}

/* The table's facts, added if new; NULL when out of memory. */
static table *find_table(Scanner *s, const field *db, const field *tb)
{
    if (s->last_hit >= 0 && same_table(&s->tables[s->last_hit], db, tb)) return &s->tables[s->last_hit];
    uint64_t h = name_hash(db, tb);
    Py_ssize_t at = s->n_slots ? (Py_ssize_t)(h & (uint64_t)(s->n_slots - 1)) : 0;
    while (s->n_slots && s->slots[at]) {
        table *t = &s->tables[s->slots[at] - 1];
        if (t->hash == h && same_table(t, db, tb)) {
            s->last_hit = s->slots[at] - 1;
            return t;
        }
        at = (at + 1) & (s->n_slots - 1);
    }
    if (s->n_tables == s->cap_tables) {
        Py_ssize_t cap = s->cap_tables ? s->cap_tables * 2 : 16;
        table *grown = PyMem_RawRealloc(s->tables, (size_t)cap * sizeof(table));
        if (!grown) return NULL;
        s->tables = grown;
        s->cap_tables = cap;
    }
    table *t = &s->tables[s->n_tables];
    memset(t, 0, sizeof(*t));
    if (!(t->name = PyMem_RawMalloc((size_t)(db->n + tb->n + 1)))) return NULL;
    memcpy(t->name, db->p, (size_t)db->n);
    t->name[db->n] = 0;
    memcpy(t->name + db->n + 1, tb->p, (size_t)tb->n);
    t->db_n = db->n;
    t->table_n = tb->n;
    t->hash = h;
    t->low_n = t->high_n = t->last_n = -1;
    s->n_tables++;
    if (s->n_tables * 2 > s->n_slots) { /* the new index takes every table, this one included */
        if (reindex(s, s->n_slots ? s->n_slots * 2 : 64) < 0) {
            PyMem_RawFree(t->name);
            s->n_tables--;
            return NULL;
        }
    } else {
        s->slots[at] = s->n_tables; /* the free slot the search above ended on */
    }
    s->last_hit = s->n_tables - 1;
    return t;
}

static void keep(unsigned char *into, Py_ssize_t *into_n, const field *pos, int want_lower)
{
    if (*into_n >= 0) {
        int c = compare(pos->p, pos->n, into, *into_n);
        if (want_lower ? c >= 0 : c <= 0) return;
    }
    memcpy(into, pos->p, (size_t)pos->n);
    *into_n = pos->n;
}

enum { COUNTED, SKIPPED, SPECIAL, NO_MEMORY };

static int count_line(Scanner *s, cursor p, cursor end)
{
    field f[F_COUNT];
    if (!read_line(p, end, f)) return SPECIAL;
    const field *pos = &f[F_POSITION], *op = &f[F_OP];
    if (pos->kind != STRING || pos->n > POS_MAX) return SPECIAL;
    if (s->upto_n >= 0 && compare(pos->p, pos->n, s->upto, s->upto_n) <= 0) return SKIPPED;
    if (f[F_DB].kind != STRING || f[F_TABLE].kind != STRING || op->kind != STRING || op->n != 1
        || !memchr("cudr", op->p[0], 4))
        return SPECIAL;
    table *t = find_table(s, &f[F_DB], &f[F_TABLE]);
    if (!t) return NO_MEMORY;
    t->rows++;
    t->removals += op->p[0] == 'u' || op->p[0] == 'd';
    keep(t->low, &t->low_n, pos, 1);
    keep(t->high, &t->high_n, pos, 0);
    keep(t->last, &t->last_n, pos, 0);
    return COUNTED;
}

static int note_special(Scanner *s, Py_ssize_t index, Py_ssize_t start, Py_ssize_t stop)
{
    if (s->n_special + 3 > s->cap_special) {
        Py_ssize_t cap = s->cap_special ? s->cap_special * 2 : 96;
        Py_ssize_t *grown = PyMem_RawRealloc(s->special, (size_t)cap * sizeof(Py_ssize_t));
        if (!grown) return -1;
        s->special = grown;
        s->cap_special = cap;
    }
    s->special[s->n_special++] = index;
    s->special[s->n_special++] = start;
    s->special[s->n_special++] = stop;
    return 0;
}

/* ---- the Python type ---- */

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"merged_upto", NULL};
    const char *upto = NULL;
    Py_ssize_t upto_n = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "z#", names, &upto, &upto_n)) return -1;
    if (upto && upto_n > POS_MAX) {
        PyErr_SetString(PyExc_ValueError, "merged_upto is longer than any position this scanner keeps");
        return -1;
    }
    s->upto_n = upto ? upto_n : -1;
    if (upto) memcpy(s->upto, upto, (size_t)upto_n);
    s->last_hit = -1;
    return 0;
}

static void Scanner_dealloc(Scanner *s)
{
    for (Py_ssize_t i = 0; i < s->n_tables; i++) PyMem_RawFree(s->tables[i].name);
    PyMem_RawFree(s->tables);
    PyMem_RawFree(s->slots);
    PyMem_RawFree(s->special);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *Scanner_feed(Scanner *s, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t stop = -1;
    if (!PyArg_ParseTuple(args, "y*|n:feed", &view, &stop)) return NULL;
    if (stop < 0 || stop > view.len) stop = view.len;
    if (s->busy) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "a Scanner is fed by one thread at a time");
        return NULL;
    }
    s->busy = 1;
    s->n_special = 0;
    cursor base = view.buf, end = base + stop, p = base;
    Py_ssize_t lines = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < end) {
        cursor nl = memchr(p, '\n', (size_t)(end - p));
        cursor stop = nl ? nl : end;
        int outcome = count_line(s, p, stop);
        if (outcome == NO_MEMORY
            || (outcome == SPECIAL && note_special(s, lines, p - base, (nl ? nl + 1 : end) - base) < 0)) {
            failed = 1;
            break;
        }
        lines++;
        p = nl ? nl + 1 : end;
    }
    Py_END_ALLOW_THREADS
    s->busy = 0;
    PyBuffer_Release(&view);
    if (failed) return PyErr_NoMemory();
    PyObject *special = PyList_New(s->n_special / 3);
    if (!special) return NULL;
    for (Py_ssize_t i = 0; i < s->n_special / 3; i++) {
        PyObject *item = Py_BuildValue("(nnn)", s->special[3 * i], s->special[3 * i + 1], s->special[3 * i + 2]);
        if (!item) {
            Py_DECREF(special);
            return NULL;
        }
        PyList_SET_ITEM(special, i, item);
    }
    return Py_BuildValue("(nN)", lines, special);
}

static PyObject *Scanner_tables(Scanner *s, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(s->n_tables);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < s->n_tables; i++) {
        table *t = &s->tables[i];
        PyObject *item = Py_BuildValue("(s#s#LLs#s#s#)", t->name, t->db_n, t->name + t->db_n + 1, t->table_n,
                                       t->rows, t->removals, t->low, t->low_n, t->high, t->high_n, t->last, t->last_n);
        if (!item) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_VARARGS,
     "feed(buffer, stop=len) -> (lines, [(line index, start, end), ...]): buffer[:stop] holds whole lines (the last\n"
     "one may lack its newline); the lines listed are left to the Python path."},
    {"tables", (PyCFunction)Scanner_tables, METH_NOARGS,
     "tables() -> [(db, table, rows, removals, min position, max position, last position), ...]"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc.spark._scan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scanner(merged_upto): per-table facts of the row-change lines after merged_upto.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_scan", "The merge's table facts from change lines, in C (cdc.spark.scan).", -1, NULL,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    if (PyModule_AddIntConstant(module, "ABI_VERSION", ABI_VERSION) < 0
        || PyModule_AddIntConstant(module, "POS_MAX", POS_MAX) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(module, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
