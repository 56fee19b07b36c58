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
#include "_scan_json.h"
#include "_latest.h"

/* Raised when this file or _latest.c changes what the Python side must pass or may expect (cdc/spark/scan.py). */
#define ABI_VERSION 5

/* The Latest's first four fields: a Scanner that feeds a Latest reads the Latest's six in one go. */
enum { F_DB = L_DB, F_TABLE = L_TABLE, F_OP = L_OP, F_POSITION = L_POSITION, F_COUNT = L_POSITION + 1 };

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

static int wanted(cursor key, Py_ssize_t n)
{
    switch (n) {
    case 2: return memcmp(key, "db", 2) == 0 ? F_DB : memcmp(key, "op", 2) == 0 ? F_OP : -1;
    case 5: return memcmp(key, "table", 5) == 0 ? F_TABLE : -1;
    case 8: return memcmp(key, "position", 8) == 0 ? F_POSITION : -1;
    default: return -1;
    }
}

/* ---- the per-table facts ---- */

static uint64_t table_hash(const field *db, const field *tb)
{
    return name_hash(db->p, db->n, tb->p, tb->n);
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
    uint64_t h = table_hash(db, tb);
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

/* A line whose fields (F_COUNT or more) were read. */
static int count_fields(Scanner *s, const field *f)
{
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

static int count_line(Scanner *s, cursor p, cursor end)
{
    field f[F_COUNT];
    return read_fields(p, end, f, F_COUNT, wanted, 0) ? count_fields(s, f) : SPECIAL;
}

/* count_line, and the line fed to a Latest's part from the same read (-1: out of memory for the Latest). */
static int count_and_feed(Scanner *s, PyObject *latest, void *part, cursor p, cursor end)
{
    field f[L_COUNT];
    int read = read_fields(p, end, f, L_COUNT, latest_wanted, 0);
    if (latest_line(latest, part, p, end, read ? f : NULL) < 0) return -1;
    return read ? count_fields(s, f) : SPECIAL;
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
    Py_ssize_t stop = -1, index = 0;
    PyObject *latest = Py_None;
    if (!PyArg_ParseTuple(args, "y*|nOn:feed", &view, &stop, &latest, &index)) return NULL;
    if (stop < 0 || stop > view.len) stop = view.len;
    if (s->busy) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "a Scanner is fed by one thread at a time");
        return NULL;
    }
    void *part = NULL;
    if (latest != Py_None && !(part = latest_claim(latest, index))) {
        PyBuffer_Release(&view);
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
        int outcome = part ? count_and_feed(s, latest, part, p, stop) : count_line(s, p, stop);
        if (outcome < 0 || outcome == NO_MEMORY
            || (outcome == SPECIAL && note_special(s, lines, p - base, (nl ? nl + 1 : end) - base) < 0)) {
            failed = 1;
            break;
        }
        lines++;
        p = nl ? nl + 1 : end;
    }
    Py_END_ALLOW_THREADS
    s->busy = 0;
    if (part) latest_release(part);
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
     "feed(buffer, stop=len, latest=None, part=0) -> (lines, [(line index, start, end), ...]): buffer[:stop] holds\n"
     "whole lines (the last one may lack its newline); the lines listed are left to the Python path. With a Latest,\n"
     "the same lines are fed to its part as Latest.feed(part, buffer, stop) would, from the same read of each."},
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
    if (PyType_Ready(&LatestType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&LatestType);
    if (PyModule_AddObject(module, "Latest", (PyObject *)&LatestType) < 0) {
        Py_DECREF(&LatestType);
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
