/* A kept change line in flat form: what the compaction reads of it, tab-separated, one line per change.
 *
 * Spark's JSON reader was the largest part of a big merge's compaction; splitting a line at its tabs costs a third
 * of it (docs/performance.md, "the kept lines in flat form"). A line is written flat only where both readings give
 * the same values, so that the compaction cannot tell them apart:
 *   op \t position \t ts \t key values \t before? \t before's key values \t after? \t after's other values \n
 * (no trailing tab: the last field ends the line)
 * per table in the order of its layout: its key columns, then the other columns the compaction reads from `after`.
 * `\N` is null (a JSON null, a member absent, or an image that is null: `before?`/`after?` are `1` or `\N`).
 *
 * Plain, and so flat: one strict JSON object whose top-level members are only the change log's own (after, before,
 * db, key, op, position, src, table, ts, v), each once; db, table, op (c/u/d/r), position and ts strings without an
 * escape; key an object, before and after objects or null; each value read of them a string without an escape (its
 * bytes are then its text: no tab, no newline, valid UTF-8), an integer as -?(0|[1-9][0-9]*) of up to 18 characters
 * but not -0 (Spark's reader writes such an integer back as exactly that), true, false or null; no member read twice,
 * none whose name differs from a layout's column only in case. Anything else (a float, an escape, a nested value,
 * `fk_checks`) stays a JSON line, read as before.
 */
#include "_flat.h"

#define FLAT_NULL 100 /* a field kind beside _scan_json.h's: a JSON null */
#define CLASH -2     /* a member name equal to a column's but for case */

struct flat_layout {
    Py_ssize_t n_keys, n_values;
    unsigned char *names; /* the key columns' names, then the values' */
    Py_ssize_t *at, *len;
    Py_ssize_t *slots; /* name number + 1 by the hash of its name in lower case, 0 empty */
    Py_ssize_t n_slots;
};

/* Called for every member of every kept line: by length first, so that each memcmp has a constant size (inlined). */
int flat_wanted(cursor name, Py_ssize_t n)
{
#define IS(word, number) (memcmp(name, word, sizeof(word) - 1) == 0 ? (number) : FLAT_OTHER)
    switch (n) {
    case 1: return IS("v", FLAT_V);
    case 2: return name[0] == 'd' ? IS("db", FLAT_DB) : name[0] == 'o' ? IS("op", FLAT_OP) : IS("ts", FLAT_TS);
    case 3: return name[0] == 'k' ? IS("key", FLAT_KEY) : IS("src", FLAT_SRC);
    case 5: return name[0] == 'a' ? IS("after", FLAT_AFTER) : IS("table", FLAT_TABLE);
    case 6: return IS("before", FLAT_BEFORE);
    case 8: return IS("position", FLAT_POSITION);
    default: return FLAT_OTHER;
    }
#undef IS
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static uint64_t lower_hash(cursor p, Py_ssize_t n)
{
    uint64_t h = FNV_START;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ lower(p[i])) * FNV_PRIME;
    return h;
}

static int same_but_case(cursor a, cursor b, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (lower(a[i]) != lower(b[i])) return 0;
    return 1;
}

/* A member name's column number, -1 if none, CLASH if it differs from one only in case. */
static Py_ssize_t lookup(const flat_layout *layout, cursor name, Py_ssize_t n)
{
    Py_ssize_t at = (Py_ssize_t)(lower_hash(name, n) & (uint64_t)(layout->n_slots - 1)), found = -1;
    while (layout->slots[at]) {
        Py_ssize_t i = layout->slots[at] - 1;
        cursor column = layout->names + layout->at[i];
        if (layout->len[i] == n && memcmp(column, name, (size_t)n) == 0) found = i;
        else if (layout->len[i] == n && same_but_case(column, name, n)) return CLASH;
        at = (at + 1) & (layout->n_slots - 1);
    }
    return found;
}

static int add_names(PyObject *list, Py_ssize_t *total)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        Py_ssize_t n;
        PyObject *name = PyList_GET_ITEM(list, i);
        if (!PyUnicode_Check(name) || !PyUnicode_AsUTF8AndSize(name, &n)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "flat layout: column names are str");
            return -1;
        }
        *total += n;
    }
    return 0;
}

flat_layout *flat_layout_new(PyObject *keys, PyObject *values)
{
    Py_ssize_t total = 0;
    if (!PyList_Check(keys) || !PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "flat layout: two lists of column names");
        return NULL;
    }
    if (add_names(keys, &total) < 0 || add_names(values, &total) < 0) return NULL;
    flat_layout *layout = PyMem_RawCalloc(1, sizeof(flat_layout));
    if (!layout) return (flat_layout *)PyErr_NoMemory();
    layout->n_keys = PyList_GET_SIZE(keys);
    layout->n_values = PyList_GET_SIZE(values);
    Py_ssize_t count = layout->n_keys + layout->n_values;
    layout->n_slots = 16;
    while (layout->n_slots < 2 * count) layout->n_slots *= 2;
    layout->names = PyMem_RawMalloc((size_t)total + 1);
    layout->at = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)(count + 1));
    layout->len = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)(count + 1));
    layout->slots = PyMem_RawCalloc((size_t)layout->n_slots, sizeof(Py_ssize_t));
    if (!layout->names || !layout->at || !layout->len || !layout->slots) {
        flat_layout_free(layout);
        return (flat_layout *)PyErr_NoMemory();
    }
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t n;
        PyObject *list = i < layout->n_keys ? keys : values;
        const char *name = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(list, i < layout->n_keys ? i : i - layout->n_keys), &n);
        if (used + n > total || lookup(layout, (cursor)name, n) != -1) { /* listed twice (or in two cases) */
            PyErr_SetString(PyExc_ValueError, "flat layout: a column is named twice");
            flat_layout_free(layout);
            return NULL;
        }
        memcpy(layout->names + used, name, (size_t)n);
        layout->at[i] = used;
        layout->len[i] = n;
        used += n;
        Py_ssize_t at = (Py_ssize_t)(lower_hash((cursor)name, n) & (uint64_t)(layout->n_slots - 1));
        while (layout->slots[at]) at = (at + 1) & (layout->n_slots - 1);
        layout->slots[at] = i + 1;
    }
    return layout;
}

void flat_layout_free(flat_layout *layout)
{
    if (!layout) return;
    PyMem_RawFree(layout->names);
    PyMem_RawFree(layout->at);
    PyMem_RawFree(layout->len);
    PyMem_RawFree(layout->slots);
    PyMem_RawFree(layout);
}

field *flat_scratch(const flat_layout *layout)
{
    return PyMem_RawCalloc((size_t)(2 * layout->n_keys + layout->n_values + 1), sizeof(field));
}

/* A value Spark's reader gives as these very bytes (or null): into *f; the byte after it, NULL if not plain. */
static cursor plain_value(cursor v, cursor end, field *f)
{
    int escaped = 0;
    cursor q, digits;
    if (v >= end) return NULL;
    switch (*v) {
    case '"':
        if (!(q = skip_string(v + 1, end, &escaped)) || escaped) return NULL;
        *f = (field){v + 1, q - v - 2, STRING};
        return q;
    case 'n':
        *f = (field){v, 0, FLAT_NULL};
        return skip_literal(v, end, "null", 4);
    case 't':
    case 'f':
        q = *v == 't' ? skip_literal(v, end, "true", 4) : skip_literal(v, end, "false", 5);
        *f = (field){v, q ? q - v : 0, OTHER};
        return q;
    default:
        if (!(q = skip_number(v, end, 0))) return NULL;
        digits = *v == '-' ? v + 1 : v;
        if (digits >= q || (*digits == '0' && (q - digits > 1 || digits != v))) return NULL; /* 0 alone; no -0 */
        for (cursor c = digits; c < q; c++)
            if (*c < '0' || *c > '9') return NULL; /* a fraction or an exponent: Spark writes it its own way */
        *f = (field){v, q - v, OTHER};
        return q;
    }
}

/* An object's members (inside its braces): those of the layout's columns first..first+n into slots[0..n); 0 if not
 * plain. Other members are passed over, as Spark's reader passes over fields its schema lacks. */
static int take_object(const flat_layout *layout, cursor p, cursor end, Py_ssize_t first, Py_ssize_t n, field *slots)
{
    p = skip_ws(p, end);
    while (p < end) {
        int escaped = 0;
        if (*p != '"') return 0;
        cursor name = p + 1;
        if (!(p = skip_string(name, end, &escaped)) || escaped) return 0;
        Py_ssize_t i = lookup(layout, name, p - 1 - name);
        p = skip_ws(p, end);
        if (i == CLASH || p >= end || *p != ':') return 0;
        cursor v = skip_ws(p + 1, end);
        if (i >= first && i < first + n) {
            if (slots[i - first].kind != ABSENT || !(p = plain_value(v, end, &slots[i - first]))) return 0;
        } else if (!(p = skip_value(v, end, 2, 1))) {
            return 0;
        }
        p = skip_ws(p, end);
        if (p < end && (*p != ',' || (p = skip_ws(p + 1, end)) >= end)) return 0;
    }
    return 1;
}

/* A top-level member that is a string without an escape (its bytes are its text). */
static int plain_string(const field *f)
{
    return f->kind == STRING;
}

/* An image member: 1 an object (its members in f), 0 null or absent, -1 anything else. */
static int image(const field *f)
{
    if (f->kind == ABSENT || (f->kind == OTHER && f->p[-1] == 'n')) return 0;
    return f->kind == OTHER && f->p[-1] == '{' ? 1 : -1;
}

static void put(unsigned char **out, cursor p, Py_ssize_t n)
{
    memcpy(*out, p, (size_t)n);
    *out += n;
}

/* A value, `\\N` for null, and a tab after it. */
static void put_value(unsigned char **out, const field *f)
{
    if (f->kind == ABSENT || f->kind == FLAT_NULL) put(out, (cursor) "\\N", 2);
    else put(out, f->p, f->n);
    *(*out)++ = '\t';
}

static int grow_buffer(flat_buffer *out, Py_ssize_t need)
{
    if (out->n + need <= out->cap) return 0;
    Py_ssize_t cap = out->cap ? out->cap : 1 << 16;
    while (cap < out->n + need) cap *= 2;
    unsigned char *grown = PyMem_RawRealloc(out->bytes, (size_t)cap);
    if (!grown) return -1;
    out->bytes = grown;
    out->cap = cap;
    return 0;
}

int flat_line(const flat_layout *layout, field *scratch, const field *top, int in_lake, flat_buffer *out)
{
    const field *op = &top[FLAT_OP], *ts = &top[FLAT_TS], *key = &top[FLAT_KEY];
    int before = image(&top[FLAT_BEFORE]), after = image(&top[FLAT_AFTER]);
    int ts_null = ts->kind == ABSENT || (ts->kind == OTHER && ts->p[-1] == 'n');
    if (top[FLAT_OTHER].kind != ABSENT || !plain_string(op) || op->n != 1 || !memchr("cudr", op->p[0], 4)
        || !plain_string(&top[FLAT_POSITION]) || (!ts_null && !plain_string(ts)) || image(key) != 1
        || before < 0 || after < 0)
        return 0;
    Py_ssize_t k = layout->n_keys, total = 2 * k + layout->n_values;
    memset(scratch, 0, sizeof(field) * (size_t)total);
    if (!take_object(layout, key->p, key->p + key->n, 0, k, scratch)
        || (before && !take_object(layout, top[FLAT_BEFORE].p, top[FLAT_BEFORE].p + top[FLAT_BEFORE].n, 0, k,
                                   scratch + k))
        || (after && !take_object(layout, top[FLAT_AFTER].p, top[FLAT_AFTER].p + top[FLAT_AFTER].n, k,
                                  layout->n_values, scratch + 2 * k)))
        return 0;
    Py_ssize_t need = op->n + top[FLAT_POSITION].n + (ts_null ? 2 : ts->n) + 3 + 3 + 3 + 2;
    for (Py_ssize_t i = 0; i < total; i++) need += (scratch[i].kind == STRING || scratch[i].kind == OTHER ? scratch[i].n : 2) + 1;
    if (grow_buffer(out, need) < 0) return -1;
    unsigned char *w = out->bytes + out->n;
    field null = {NULL, 0, FLAT_NULL};
    put_value(&w, op);
    put_value(&w, &top[FLAT_POSITION]);
    put_value(&w, ts_null ? &null : ts);
    for (Py_ssize_t i = 0; i < k; i++) put_value(&w, &scratch[i]);
    put(&w, before ? (cursor) "1\t" : (cursor) "\\N\t", before ? 2 : 3);
    for (Py_ssize_t i = 0; i < k; i++) put_value(&w, &scratch[k + i]);
    put(&w, after ? (cursor) "1\t" : (cursor) "\\N\t", after ? 2 : 3);
    for (Py_ssize_t i = 0; i < layout->n_values; i++) put_value(&w, &scratch[2 * k + i]);
    if (in_lake) put(&w, (cursor) "1\t", 2); /* one field more: the lake holds the line's key (Latest.in_lake) */
    w[-1] = '\n'; /* the last tab ends the line */
    out->n = w - out->bytes;
    return 1;
}
