/* Which change lines a merge need not read: each one superseded by a later change of the same key, in C.
 *
 * The compaction keeps, per table and key, only the change with the highest position (cdc.spark.compact); every
 * earlier change of the key is read, parsed, shuffled and sorted only to lose. A Latest marks a line skipped when
 * a line with a strictly higher position, of the same table, has a byte-identical `key`: the same bytes are the
 * same key whatever reads them. write() then copies the other lines out, and the compaction reads those instead:
 * every key's last change is among them, so its winners are the same.
 *
 * Exactness rule: only a line this code is sure of takes part, every other one is kept as it is: one strict JSON
 * object (_scan_json.h), string `db`/`table` (escapes decoded), a plain-string `position`, a row op (c/u/d/r),
 * `key` an object, and a table of the list it was given (the caller's: tables whose run holds one schema version,
 * with a primary key). An update whose `before` does not hold the same bytes for every key column as its `key`
 * (or where this code is not sure of it) moves its row: the compaction reads it as a delete of the old key too,
 * so it is never skipped, though it still supersedes its new key's earlier lines. Lines at or before merged_upto
 * are skipped: the merge drops them anyway. Two lines at one position are both kept (the compaction collapses
 * duplicates).
 *
 * The lines come in parts (the input files): feed() records each part's row changes of listed tables, several
 * parts at once from several threads (no interpreter lock, nothing shared but the counter of records); resolve()
 * then finds each key's last change over all of them; write() copies each part's lines that are kept, parts at
 * once again. Each part's lines go to write() in the order they went to feed(). A Scanner (_scan.c) may feed a
 * part instead, from its own read of each line (latest_claim, latest_line): one parse of the input for both.
 *
 * unique() then says, per table, whether the lines kept hold one event per key, so that the compaction may leave out
 * its search for each key's last change (a shuffle of every event). Only where nothing can break it: the table's key
 * columns are integers or plain text (the caller's `kinds`) and every key is in the one form the change log writes
 * (canonical_key), so that different bytes are different keys to the compaction too; no kept line moves its row (two
 * events), none ties with its key's last change, none of the table is kept unrecorded; and no line that may be a row
 * change of any table was beyond this code's reading.
 */
#include <errno.h>
#include <unistd.h>

#include "_scan_json.h"
#include "_latest.h"
#include "_flat.h"
#include "_lakekeys.h"

typedef struct {
    unsigned char *names; /* db, table, then each key column's name */
    Py_ssize_t db_n, table_n, n_keys;
    Py_ssize_t *key_at, *key_n; /* each key column's name in `names` */
    uint64_t hash;
    char *kinds;     /* per key column: 'i' an integer, 's' text; NULL: never unique() */
    int unique;      /* so far, the table's kept lines hold one event per key (written by several threads: atomics) */
    flat_layout *flat; /* write()'s flat form of the table's kept lines (_flat.c); NULL: none */
} listed;

/* A row change of a listed table, as feed() found it. */
typedef struct {
    Py_ssize_t line; /* in its part */
    Py_ssize_t at;   /* the key's bytes in its part's arena, then the position's */
    uint64_t hash;   /* of table and key: computed by feed(), parts at once, for resolve()'s one thread */
    int32_t table, key_n, pos_n;
    int32_t pinned;  /* the line moves its row: never skipped */
} record;

/* One input file: fed (and written) by one thread at a time, parts at once. */
typedef struct {
    record *records;
    Py_ssize_t n_records, cap_records;
    unsigned char *arena;
    Py_ssize_t arena_n, arena_cap;
    unsigned char *skip; /* per line: 1 skipped */
    Py_ssize_t n_lines, cap_lines, skipped;
    Py_ssize_t written; /* lines write() has gone past */
    int busy;
} part;

/* A key's last change so far: its record's fields, copied so that a lookup reads the entry and the key's bytes. */
typedef struct {
    uint64_t hash;
    cursor key; /* then the position, in its part's arena */
    Py_ssize_t line, part;
    int32_t table, key_n, pos_n, pinned;
} entry;

#define KEY_MAX (1 << 16) /* a longer key is not tracked (its lines are kept): the arena stays small */

typedef struct {
    PyObject_HEAD
    unsigned char upto[POS_MAX];
    Py_ssize_t upto_n; /* -1: no merged_upto */
    listed *tables;
    Py_ssize_t n_tables;
    Py_ssize_t *table_slots; /* table number + 1, 0 empty */
    Py_ssize_t n_table_slots;
    part *parts;
    Py_ssize_t n_parts;
    Py_ssize_t max_records, recorded; /* past max_records (all parts), lines are not recorded: memory stays bounded */
    entry *entries;
    Py_ssize_t n_entries, cap_entries;
    Py_ssize_t *slots; /* entry number + 1, 0 empty */
    Py_ssize_t n_slots;
    int resolved;
    int unsure; /* a line that may be a row change was not read: no table's kept lines are known unique */
    int holding; /* resolved, and the records and the hash of keys are still held for in_lake() (until write()) */
    int marking; /* in_lake() calls running (without the interpreter lock) */
    int marked;  /* some kept line is marked in the lake (a mark of 2): write() must be given where such lines go */
} Latest;

int latest_wanted(cursor key, Py_ssize_t n)
{
    switch (n) {
    case 2: return memcmp(key, "db", 2) == 0 ? L_DB : memcmp(key, "op", 2) == 0 ? L_OP : -1;
    case 3: return memcmp(key, "key", 3) == 0 ? L_KEY : -1;
    case 5: return memcmp(key, "table", 5) == 0 ? L_TABLE : -1;
    case 6: return memcmp(key, "before", 6) == 0 ? L_BEFORE : -1;
    case 8: return memcmp(key, "position", 8) == 0 ? L_POSITION : -1;
    default: return -1;
    }
}

static int grow(void **items, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap) return 0;
    Py_ssize_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *grown = PyMem_RawRealloc(*items, (size_t)n * size);
    if (!grown) return -1;
    *items = grown;
    *cap = n;
    return 0;
}

#define NAME_MAX_BYTES 1024 /* MySQL names are 64 characters: 256 bytes of UTF-8; a longer escaped one is not taken */

/* A JSON string's escaped bytes (checked by skip_string: no surrogate escape) decoded into `out` as UTF-8; its
 * length, -1 if longer than NAME_MAX_BYTES. */
static Py_ssize_t unescape(const field *f, unsigned char *out)
{
    cursor p = f->p, end = f->p + f->n;
    Py_ssize_t n = 0;
    while (p < end) {
        if (n + 3 > NAME_MAX_BYTES) return -1;
        if (*p != '\\') {
            out[n++] = *p++;
            continue;
        }
        unsigned c = p[1], v = 0;
        p += 2;
        switch (c) {
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u':
            if (!hex4(p, &v)) return -1;
            p += 4;
            if (v < 0x80) {
                out[n++] = (unsigned char)v;
            } else if (v < 0x800) {
                out[n++] = (unsigned char)(0xC0 | (v >> 6));
                out[n++] = (unsigned char)(0x80 | (v & 0x3F));
            } else {
                out[n++] = (unsigned char)(0xE0 | (v >> 12));
                out[n++] = (unsigned char)(0x80 | ((v >> 6) & 0x3F));
                out[n++] = (unsigned char)(0x80 | (v & 0x3F));
            }
            break;
        default: out[n++] = (unsigned char)c; /* " \ / */
        }
    }
    return n;
}

/* A name as the table list holds it: escaped ones decoded into `buffer`; 0 if too long to take. */
static int plain_name(const field *f, unsigned char *buffer, field *out)
{
    *out = *f;
    if (f->kind == STRING) return 1;
    Py_ssize_t n = unescape(f, buffer);
    if (n < 0) return 0;
    out->p = buffer;
    out->n = n;
    return 1;
}

static Py_ssize_t find_listed(const Latest *s, const field *db, const field *tb)
{
    uint64_t h = name_hash(db->p, db->n, tb->p, tb->n);
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)(s->n_table_slots - 1));
    while (s->table_slots[at]) {
        const listed *t = &s->tables[s->table_slots[at] - 1];
        if (t->hash == h && t->db_n == db->n && t->table_n == tb->n && memcmp(t->names, db->p, (size_t)db->n) == 0
            && memcmp(t->names + db->n, tb->p, (size_t)tb->n) == 0)
            return s->table_slots[at] - 1;
        at = (at + 1) & (s->n_table_slots - 1);
    }
    return -1;
}

/* How many members of the object whose members are p..end are named `name` (the last one's value bytes in
 * *value); -1 if not sure (a member name escaped: it may spell `name`). */
static Py_ssize_t find_member(cursor p, cursor end, cursor name, Py_ssize_t name_n, cursor *value, Py_ssize_t *value_n)
{
    Py_ssize_t found = 0;
    p = skip_ws(p, end);
    while (p < end) {
        int escaped = 0;
        if (*p != '"') return -1;
        cursor key = p + 1;
        if (!(p = skip_string(key, end, &escaped)) || escaped) return -1;
        Py_ssize_t key_n = p - 1 - key;
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return -1;
        cursor v = skip_ws(p + 1, end);
        if (!(p = skip_value(v, end, 2, 1))) return -1;
        if (key_n == name_n && memcmp(key, name, (size_t)name_n) == 0) {
            found++;
            *value = v;
            *value_n = p - v;
        }
        p = skip_ws(p, end);
        if (p < end) {
            if (*p != ',') return -1;
            p = skip_ws(p + 1, end);
        }
    }
    return found;
}

/* 1 if `before` holds every key column exactly as `key` does (or neither holds it): the update keeps its row. */
static int keeps_row(const listed *t, const field *key, const field *before)
{
    if (before->kind != OTHER || before->p[-1] != '{') return 0;
    for (Py_ssize_t i = 0; i < t->n_keys; i++) {
        cursor name = t->names + t->key_at[i], a = NULL, b = NULL;
        Py_ssize_t a_n = 0, b_n = 0;
        Py_ssize_t in_key = find_member(key->p, key->p + key->n, name, t->key_n[i], &a, &a_n);
        Py_ssize_t in_before = find_member(before->p, before->p + before->n, name, t->key_n[i], &b, &b_n);
        if (in_key < 0 || in_key > 1 || in_key != in_before) return 0;
        if (in_key && (a_n != b_n || memcmp(a, b, (size_t)a_n) != 0)) return 0;
    }
    return 1;
}

static void not_unique(listed *t)
{
    __atomic_store_n(&t->unique, 0, __ATOMIC_RELAXED);
}

/* An integer as the change log writes one: -?(0|[1-9][0-9]*), not -0; the byte after it, NULL if not that. */
static cursor plain_integer(cursor p, cursor end)
{
    cursor digits = p < end && *p == '-' ? p + 1 : p;
    if (digits >= end || *digits < '0' || *digits > '9' || (*digits == '0' && digits != p)) return NULL;
    p = digits + 1;
    if (*digits != '0') while (p < end && *p >= '0' && *p <= '9') p++;
    return p < end && (*p == '.' || *p == 'e' || *p == 'E') ? NULL : p;
}

/* A JSON string of printable ASCII without an escape: its bytes are its text. The byte after it, NULL if not that. */
static cursor plain_text(cursor p, cursor end)
{
    if (p >= end || *p++ != '"') return NULL;
    while (p < end && *p != '"') {
        if (*p < 0x20 || *p >= 0x80 || *p == '\\') return NULL;
        p++;
    }
    return p < end ? p + 1 : NULL;
}

/* 1 if a key object's members (p..end, inside its braces) are in the form every writer of the change log gives a
 * key (docs/formats.md: names sorted, no whitespace): each key column once, by byte order of its name, an integer
 * column's value as plain_integer, a text column's as plain_text. Two keys in this form are the same key exactly
 * when their bytes are the same, as the compaction's typed key columns see them. */
static int canonical_key(const listed *t, cursor p, cursor end)
{
    cursor last = NULL;
    Py_ssize_t last_n = 0, seen = 0;
    while (p < end) {
        if (*p != '"') return 0;
        cursor name = ++p;
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
        if (p + 1 >= end || *p != '"' || p[1] != ':') return 0;
        Py_ssize_t name_n = p - name, i = 0;
        while (i < t->n_keys && (t->key_n[i] != name_n || memcmp(t->names + t->key_at[i], name, (size_t)name_n)))
            i++;
        if (i == t->n_keys || (last && compare(name, name_n, last, last_n) <= 0)) return 0;
        last = name;
        last_n = name_n;
        p = t->kinds[i] == 'i' ? plain_integer(p + 2, end) : plain_text(p + 2, end);
        if (!p) return 0;
        seen++;
        if (p < end && (*p != ',' || ++p == end)) return 0;
    }
    return seen == t->n_keys;
}

/* Per line of a part, in `skip`: kept, skipped (superseded or merged before), or kept and its key in the lake. */
enum { KEPT = 0, SKIPPED = 1, IN_LAKE = 2 };

static void skip_line(part *in, Py_ssize_t line)
{
    in->skip[line] = SKIPPED;
    in->skipped++;
}

static int reindex(Latest *s, Py_ssize_t n)
{
    Py_ssize_t *slots = PyMem_RawCalloc((size_t)n, sizeof(Py_ssize_t));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < s->n_entries; i++) {
        Py_ssize_t at = (Py_ssize_t)(s->entries[i].hash & (uint64_t)(n - 1));
        while (slots[at]) at = (at + 1) & (n - 1);
        slots[at] = i + 1;
    }
    PyMem_RawFree(s->slots);
    s->slots = slots;
    s->n_slots = n;
    return 0;
}

/* A record against the last change kept for its key: the older of the two is skipped (unless it moves its row). */
static int supersede(Latest *s, Py_ssize_t p, const record *r)
{
    part *in = &s->parts[p];
    cursor key = in->arena + r->at;
    uint64_t h = r->hash;
    if (s->n_entries * 2 >= s->n_slots && reindex(s, s->n_slots ? s->n_slots * 2 : 4096) < 0) return -1;
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)(s->n_slots - 1));
    while (s->slots[at]) {
        entry *e = &s->entries[s->slots[at] - 1];
        if (e->hash == h && e->table == r->table && e->key_n == r->key_n && memcmp(e->key, key, (size_t)r->key_n) == 0) {
            int c = compare(key + r->key_n, r->pos_n, e->key + e->key_n, e->pos_n);
            if (c == 0) not_unique(&s->tables[r->table]); /* both kept: the compaction collapses them */
            if (c < 0 && !r->pinned) skip_line(in, r->line);
            if (c <= 0) return 0;
            if (!e->pinned) skip_line(&s->parts[e->part], e->line);
            *e = (entry){h, key, r->line, p, r->table, r->key_n, r->pos_n, r->pinned};
            return 0;
        }
        at = (at + 1) & (s->n_slots - 1);
    }
    if (grow((void **)&s->entries, &s->cap_entries, s->n_entries + 1, sizeof(entry)) < 0) return -1;
    s->entries[s->n_entries] = (entry){h, key, r->line, p, r->table, r->key_n, r->pos_n, r->pinned};
    s->slots[at] = ++s->n_entries;
    return 0;
}

static int add_record(Latest *s, part *in, Py_ssize_t line, Py_ssize_t table, const field *key, const field *pos,
                      int pinned)
{
    if (__atomic_add_fetch(&s->recorded, 1, __ATOMIC_RELAXED) > s->max_records) { /* kept, unknown */
        not_unique(&s->tables[table]);
        return 0;
    }
    if (grow((void **)&in->records, &in->cap_records, in->n_records + 1, sizeof(record)) < 0
        || grow((void **)&in->arena, &in->arena_cap, in->arena_n + key->n + pos->n, 1) < 0)
        return -1;
    record *r = &in->records[in->n_records++];
    r->line = line;
    r->at = in->arena_n;
    r->table = (int32_t)table;
    r->key_n = (int32_t)key->n;
    r->pos_n = (int32_t)pos->n;
    r->pinned = pinned;
    r->hash = fnv(fnv(FNV_START, (cursor)&r->table, sizeof r->table), key->p, key->n);
    memcpy(in->arena + in->arena_n, key->p, (size_t)key->n);
    memcpy(in->arena + in->arena_n + key->n, pos->p, (size_t)pos->n);
    in->arena_n += key->n + pos->n;
    return 0;
}

/* One line of a part, its fields read: 0, or -1 when out of memory. */
static int take_fields(Latest *s, part *in, const field *f, Py_ssize_t line)
{
    const field *pos = &f[L_POSITION], *op = &f[L_OP], *key = &f[L_KEY];
    /* Only a string can be a row op: an escaped one may be, and is not read here. */
    int maybe_row = op->kind == ESCAPED || (op->kind == STRING && op->n == 1 && memchr("cudr", op->p[0], 4));
    if (pos->kind != STRING || pos->n > POS_MAX) {
        if (maybe_row) __atomic_store_n(&s->unsure, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (s->upto_n >= 0 && compare(pos->p, pos->n, s->upto, s->upto_n) <= 0) {
        skip_line(in, line);
        return 0;
    }
    unsigned char db_buffer[NAME_MAX_BYTES], table_buffer[NAME_MAX_BYTES];
    field db, tb;
    if (f[L_DB].kind == OTHER || f[L_TABLE].kind == OTHER || f[L_DB].kind == ABSENT || f[L_TABLE].kind == ABSENT
        || op->kind != STRING || op->n != 1 || !memchr("cudr", op->p[0], 4) || key->kind != OTHER
        || key->p[-1] != '{' || key->n > KEY_MAX || !plain_name(&f[L_DB], db_buffer, &db)
        || !plain_name(&f[L_TABLE], table_buffer, &tb)) {
        if (maybe_row) __atomic_store_n(&s->unsure, 1, __ATOMIC_RELAXED);
        return 0;
    }
    Py_ssize_t table = find_listed(s, &db, &tb);
    if (table < 0) return 0;
    listed *t = &s->tables[table];
    int pinned = op->p[0] == 'u' && !keeps_row(t, key, &f[L_BEFORE]);
    if (__atomic_load_n(&t->unique, __ATOMIC_RELAXED) && (pinned || !canonical_key(t, key->p, key->p + key->n)))
        not_unique(t);
    return add_record(s, in, line, table, key, pos, pinned);
}

/* The next line of a part (fields: as latest_line's): 0, or -1 when out of memory. */
static int next_line(Latest *s, part *in, cursor p, cursor end, const field *fields)
{
    if (grow((void **)&in->skip, &in->cap_lines, in->n_lines + 1, 1) < 0) return -1;
    in->skip[in->n_lines] = 0;
    field read[L_COUNT];
    if (!fields) {
        /* numbers of any length (lax): they are only skipped */
        fields = read_fields(p, end, read, L_COUNT, latest_wanted, 1) ? read : NULL;
    }
    if (!fields && skip_ws(p, end) < end) /* not read, not blank: it may be a row change */
        __atomic_store_n(&s->unsure, 1, __ATOMIC_RELAXED);
    if (fields && take_fields(s, in, fields, in->n_lines) < 0) return -1;
    in->n_lines++;
    return 0;
}

/* ---- the Python type ---- */

/* A key column's name as UTF-8; NULL with an exception set. */
static const char *key_name(PyObject *keys, Py_ssize_t i, Py_ssize_t *n)
{
    PyObject *name = PyList_GET_ITEM(keys, i);
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "tables: key columns are str");
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(name, n);
}

static int add_listed(Latest *s, PyObject *item)
{
    const char *db, *tb;
    Py_ssize_t db_n, tb_n, n;
    const char *kinds = NULL;
    PyObject *keys, *values = Py_None;
    if (!PyArg_ParseTuple(item, "s#s#O!|zO;tables: (db, table, [key column, ...], kinds, [flat column, ...])", &db,
                          &db_n, &tb, &tb_n, &PyList_Type, &keys, &kinds, &values))
        return -1;
    Py_ssize_t n_keys = PyList_GET_SIZE(keys), total = db_n + tb_n;
    if (!n_keys) {
        PyErr_SetString(PyExc_ValueError, "tables: a table without a primary key cannot be listed");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_keys; i++) {
        if (!key_name(keys, i, &n)) return -1;
        total += n;
    }
    if (kinds && ((Py_ssize_t)strlen(kinds) != n_keys || strspn(kinds, "is") != strlen(kinds))) {
        PyErr_SetString(PyExc_ValueError, "tables: kinds holds 'i' or 's' per key column");
        return -1;
    }
    listed *t = &s->tables[s->n_tables++]; /* freed by dealloc from here on */
    t->names = PyMem_RawMalloc((size_t)total + 1);
    t->key_at = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)n_keys);
    t->key_n = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)n_keys);
    t->kinds = kinds ? PyMem_RawMalloc((size_t)n_keys + 1) : NULL;
    if (!t->names || !t->key_at || !t->key_n || (kinds && !t->kinds)) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(t->names, db, (size_t)db_n);
    memcpy(t->names + db_n, tb, (size_t)tb_n);
    Py_ssize_t at = db_n + tb_n;
    for (Py_ssize_t i = 0; i < n_keys; i++) {
        const char *name = key_name(keys, i, &n);
        if (!name || at + n > total) { /* a str subclass that changed its mind */
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "tables: key columns changed while read");
            return -1;
        }
        memcpy(t->names + at, name, (size_t)n);
        t->key_at[i] = at;
        t->key_n[i] = n;
        at += n;
    }
    t->db_n = db_n;
    t->table_n = tb_n;
    t->n_keys = n_keys;
    t->hash = name_hash((cursor)db, db_n, (cursor)tb, tb_n);
    if (kinds) memcpy(t->kinds, kinds, (size_t)n_keys + 1);
    t->unique = kinds != NULL;
    if (values != Py_None && !(t->flat = flat_layout_new(keys, values))) return -1;
    return 0;
}

static int Latest_init(Latest *s, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"merged_upto", "tables", "parts", "max_records", NULL};
    const char *upto = NULL;
    Py_ssize_t upto_n = 0, n_parts = 1, max_records = PY_SSIZE_T_MAX;
    PyObject *tables;
    if (s->tables) {
        PyErr_SetString(PyExc_RuntimeError, "a Latest is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "z#O!|nn", kwlist, &upto, &upto_n, &PyList_Type, &tables,
                                     &n_parts, &max_records))
        return -1;
    if (PyList_GET_SIZE(tables) > INT32_MAX || n_parts < 1) {
        PyErr_SetString(PyExc_ValueError, "tables: too many, or parts: fewer than one");
        return -1;
    }
    if (upto && upto_n > POS_MAX) {
        PyErr_SetString(PyExc_ValueError, "merged_upto is longer than any position this reader keeps");
        return -1;
    }
    s->max_records = max_records;
    s->upto_n = upto ? upto_n : -1;
    if (upto) memcpy(s->upto, upto, (size_t)upto_n);
    Py_ssize_t n = PyList_GET_SIZE(tables);
    s->n_table_slots = 16;
    while (s->n_table_slots < 2 * n) s->n_table_slots *= 2;
    s->tables = PyMem_RawCalloc((size_t)(n ? n : 1), sizeof(listed));
    s->table_slots = PyMem_RawCalloc((size_t)s->n_table_slots, sizeof(Py_ssize_t));
    s->parts = PyMem_RawCalloc((size_t)n_parts, sizeof(part));
    if (!s->tables || !s->table_slots || !s->parts) {
        PyErr_NoMemory();
        return -1;
    }
    s->n_parts = n_parts;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (add_listed(s, PyList_GET_ITEM(tables, i)) < 0) return -1;
        const listed *t = &s->tables[i];
        field db = {t->names, t->db_n, STRING}, tb = {t->names + t->db_n, t->table_n, STRING};
        if (find_listed(s, &db, &tb) >= 0) {
            PyErr_SetString(PyExc_ValueError, "tables: a table is listed twice");
            return -1;
        }
        Py_ssize_t at = (Py_ssize_t)(t->hash & (uint64_t)(s->n_table_slots - 1));
        while (s->table_slots[at]) at = (at + 1) & (s->n_table_slots - 1);
        s->table_slots[at] = i + 1;
    }
    return 0;
}

static void free_records(part *in)
{
    PyMem_RawFree(in->records);
    PyMem_RawFree(in->arena);
    in->records = NULL;
    in->arena = NULL;
    in->n_records = in->cap_records = in->arena_n = in->arena_cap = 0;
}

static void Latest_dealloc(Latest *s)
{
    for (Py_ssize_t i = 0; i < s->n_tables; i++) {
        PyMem_RawFree(s->tables[i].names);
        PyMem_RawFree(s->tables[i].key_at);
        PyMem_RawFree(s->tables[i].key_n);
        PyMem_RawFree(s->tables[i].kinds);
        flat_layout_free(s->tables[i].flat);
    }
    for (Py_ssize_t i = 0; i < s->n_parts; i++) {
        free_records(&s->parts[i]);
        PyMem_RawFree(s->parts[i].skip);
    }
    PyMem_RawFree(s->parts);
    PyMem_RawFree(s->tables);
    PyMem_RawFree(s->table_slots);
    PyMem_RawFree(s->entries);
    PyMem_RawFree(s->slots);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* The part feed() or write() works on, taken (busy) with the interpreter lock held; NULL with an exception set. */
static const char *part_problem(const Latest *s, Py_ssize_t i, int resolved)
{
    return !s->parts ? "Latest.__init__ was not called"
        : i < 0 || i >= s->n_parts ? "no such part"
        : s->parts[i].busy ? "a part is used by one thread at a time"
        : s->resolved != resolved ? (resolved ? "write() before resolve()" : "feed() after resolve()") : NULL;
}

static part *take_part(Latest *s, Py_ssize_t i, int resolved, Py_buffer *view, Py_ssize_t *stop)
{
    const char *problem = part_problem(s, i, resolved);
    if (problem) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_RuntimeError, problem);
        return NULL;
    }
    if (*stop < 0 || *stop > view->len) *stop = view->len;
    s->parts[i].busy = 1;
    return &s->parts[i];
}

static PyObject *Latest_feed(Latest *s, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t index, stop = -1;
    if (!PyArg_ParseTuple(args, "ny*|n:feed", &index, &view, &stop)) return NULL;
    part *in = take_part(s, index, 0, &view, &stop);
    if (!in) return NULL;
    cursor p = view.buf, end = p + stop;
    Py_ssize_t lines = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < end) {
        cursor nl = memchr(p, '\n', (size_t)(end - p));
        if (next_line(s, in, p, nl ? nl : end, NULL) < 0) {
            failed = 1;
            break;
        }
        lines++;
        p = nl ? nl + 1 : end;
    }
    Py_END_ALLOW_THREADS
    in->busy = 0;
    PyBuffer_Release(&view);
    if (failed) return PyErr_NoMemory();
    return PyLong_FromSsize_t(lines);
}

void *latest_claim(PyObject *latest, Py_ssize_t index)
{
    if (!PyObject_TypeCheck(latest, &LatestType)) {
        PyErr_SetString(PyExc_TypeError, "latest must be a Latest");
        return NULL;
    }
    Latest *s = (Latest *)latest;
    const char *problem = part_problem(s, index, 0);
    if (problem) {
        PyErr_SetString(PyExc_RuntimeError, problem);
        return NULL;
    }
    s->parts[index].busy = 1;
    return &s->parts[index];
}

int latest_line(PyObject *latest, void *in, cursor p, cursor end, const field *fields)
{
    return next_line((Latest *)latest, in, p, end, fields);
}

void latest_release(void *in)
{
    ((part *)in)->busy = 0;
}

static PyObject *Latest_resolve(Latest *s, PyObject *Py_UNUSED(ignored))
{
    for (Py_ssize_t p = 0; s->parts && p < s->n_parts; p++) {
        if (s->parts[p].busy) {
            PyErr_SetString(PyExc_RuntimeError, "resolve() while a part is fed");
            return NULL;
        }
    }
    if (!s->parts || s->resolved) {
        PyErr_SetString(PyExc_RuntimeError, s->parts ? "resolve() twice" : "Latest.__init__ was not called");
        return NULL;
    }
    Py_ssize_t records = 0, slots = 4096;
    for (Py_ssize_t p = 0; p < s->n_parts; p++) records += s->parts[p].n_records;
    while (slots < 2 * records) slots *= 2; /* sized once: a rehash would touch every entry again */
    int failed = reindex(s, slots) < 0
        || grow((void **)&s->entries, &s->cap_entries, records ? records : 1, sizeof(entry)) < 0;
    Py_BEGIN_ALLOW_THREADS
    /* The table is bigger than the caches: each record's slot is fetched AHEAD * 2 records before it is probed,
     * and the entry that slot names AHEAD records before (the order of the records is unchanged). */
    const Py_ssize_t AHEAD = 8;
    uint64_t mask = failed ? 0 : (uint64_t)(s->n_slots - 1);
    for (Py_ssize_t p = 0; p < s->n_parts && !failed; p++) {
        const record *rs = s->parts[p].records;
        Py_ssize_t n = s->parts[p].n_records;
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            if (i + 2 * AHEAD < n) __builtin_prefetch(&s->slots[rs[i + 2 * AHEAD].hash & mask]);
            if (i + AHEAD < n) {
                Py_ssize_t e = s->slots[rs[i + AHEAD].hash & mask];
                if (e) __builtin_prefetch(&s->entries[e - 1]);
            }
            failed = supersede(s, p, &rs[i]) < 0;
        }
    }
    Py_END_ALLOW_THREADS
    if (failed) return PyErr_NoMemory();
    s->resolved = s->holding = 1;
    Py_ssize_t lines = 0, skipped = 0;
    for (Py_ssize_t p = 0; p < s->n_parts; p++) {
        lines += s->parts[p].n_lines;
        skipped += s->parts[p].skipped;
    }
    return Py_BuildValue("(nn)", lines, skipped);
}

/* The records and the hash of keys let go: write() needs only the marks. With the interpreter lock. */
static void let_go(Latest *s)
{
    for (Py_ssize_t p = 0; p < s->n_parts; p++) free_records(&s->parts[p]);
    PyMem_RawFree(s->entries);
    PyMem_RawFree(s->slots);
    s->entries = NULL;
    s->slots = NULL;
    s->n_entries = s->cap_entries = s->n_slots = 0;
    s->holding = 0;
}

#define LAKE_BLOCK 16 /* in_lake()'s rows looked up at once */

/* The entry of a table's key (its bytes in the change log's form; h: their hash as add_record makes it), or NULL. */
static entry *entry_of(const Latest *s, int32_t table, uint64_t h, cursor key, Py_ssize_t key_n)
{
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)(s->n_slots - 1));
    while (s->slots[at]) {
        entry *e = &s->entries[s->slots[at] - 1];
        if (e->hash == h && e->table == table && e->key_n == key_n && memcmp(e->key, key, (size_t)key_n) == 0)
            return e;
        at = (at + 1) & (s->n_slots - 1);
    }
    return NULL;
}

/* in_lake(table, rows, columns): see Latest_methods. */
static PyObject *Latest_in_lake(Latest *s, PyObject *args)
{
    Py_ssize_t table, rows;
    PyObject *columns;
    if (!PyArg_ParseTuple(args, "nnO:in_lake", &table, &rows, &columns)) return NULL;
    if (!s->holding) {
        PyErr_SetString(PyExc_RuntimeError, s->resolved ? "in_lake() after write()" : "in_lake() before resolve()");
        return NULL;
    }
    if (table < 0 || table >= s->n_tables || rows < 0 || table > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "in_lake(): no such table, or rows below 0");
        return NULL;
    }
    const listed *t = &s->tables[table];
    if (s->unsure || !t->unique || !t->kinds) {
        /* Only then is every kept line of the table the last change of its key, its key in the change log's form. */
        PyErr_SetString(PyExc_ValueError, "in_lake(): the table's kept lines are not known to hold one event per key");
        return NULL;
    }
    key_columns k = {t->names, t->key_at, t->key_n, t->kinds, t->n_keys};
    Py_ssize_t *order = PyMem_RawMalloc((size_t)t->n_keys * sizeof(Py_ssize_t)), marked = 0;
    Py_buffer *views = PyMem_RawMalloc((size_t)(2 * t->n_keys) * sizeof(Py_buffer));
    lake_column *cols = PyMem_RawMalloc((size_t)t->n_keys * sizeof(lake_column));
    unsigned char *key = PyMem_RawMalloc(2 * KEY_MAX); /* a block's keys, then one alone */
    int taken = order && views && cols && key && lake_columns_take(columns, &k, rows, views, cols) == 0;
    if (!taken) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        PyMem_RawFree(order), PyMem_RawFree(views), PyMem_RawFree(cols), PyMem_RawFree(key);
        return NULL;
    }
    lake_key_order(&k, order);
    s->marking++;
    Py_BEGIN_ALLOW_THREADS
    /* The hash of keys is bigger than the caches: rows go in blocks, each row's slot fetched, then its entry, before
     * the first is compared. A block's keys are made into one buffer (LAKE_BLOCK keys of at most KEY_MAX / LAKE_BLOCK
     * bytes each); one longer, or not in the change log's form, is made again alone, up to KEY_MAX. */
    Py_ssize_t at[LAKE_BLOCK], len[LAKE_BLOCK];
    uint64_t hash[LAKE_BLOCK];
    uint64_t mask = (uint64_t)(s->n_slots - 1);
    int32_t table32 = (int32_t)table;
    for (Py_ssize_t from = 0; from < rows; from += LAKE_BLOCK) {
        Py_ssize_t block = rows - from < LAKE_BLOCK ? rows - from : LAKE_BLOCK;
        for (Py_ssize_t j = 0; j < block; j++) {
            unsigned char *out = key + j * (KEY_MAX / LAKE_BLOCK);
            len[j] = lake_key(&k, order, cols, from + j, out, KEY_MAX / LAKE_BLOCK);
            hash[j] = fnv(fnv(FNV_START, (cursor)&table32, sizeof table32), out, len[j] < 0 ? 0 : len[j]);
            __builtin_prefetch(&s->slots[hash[j] & mask]);
        }
        for (Py_ssize_t j = 0; j < block; j++) {
            at[j] = s->slots[hash[j] & mask];
            if (at[j]) __builtin_prefetch(&s->entries[at[j] - 1]);
        }
        for (Py_ssize_t j = 0; j < block; j++) {
            cursor made = key + j * (KEY_MAX / LAKE_BLOCK);
            if (len[j] < 0) {
                made = key + KEY_MAX;
                len[j] = lake_key(&k, order, cols, from + j, key + KEY_MAX, KEY_MAX);
                if (len[j] < 0) continue;
                hash[j] = fnv(fnv(FNV_START, (cursor)&table32, sizeof table32), made, len[j]);
            }
            entry *e = entry_of(s, table32, hash[j], made, len[j]);
            if (e && s->parts[e->part].skip[e->line] == KEPT) {
                s->parts[e->part].skip[e->line] = IN_LAKE;
                marked++;
            }
        }
    }
    Py_END_ALLOW_THREADS
    s->marking--;
    s->marked |= marked > 0;
    lake_columns_release(views, t->n_keys);
    PyMem_RawFree(order), PyMem_RawFree(views), PyMem_RawFree(cols), PyMem_RawFree(key);
    return PyLong_FromSsize_t(marked);
}

static PyObject *Latest_unique(Latest *s, PyObject *Py_UNUSED(ignored))
{
    if (!s->resolved) {
        PyErr_SetString(PyExc_RuntimeError, "unique() before resolve()");
        return NULL;
    }
    PyObject *out = PyList_New(s->n_tables);
    for (Py_ssize_t i = 0; out && i < s->n_tables; i++)
        PyList_SET_ITEM(out, i, PyBool_FromLong(!s->unsure && s->tables[i].unique));
    return out;
}

static int write_all(int fd, cursor p, Py_ssize_t n)
{
    while (n > 0) {
        ssize_t done = write(fd, p, (size_t)n);
        if (done < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += done;
        n -= done;
    }
    return 0;
}

/* write()'s flat outputs: per listed table, its file (-1 none), the lines in flat form so far, room for one line. */
typedef struct {
    int *fds;
    flat_buffer *buffers;
    field **scratch;
} flat_outputs;

static void free_outputs(const Latest *s, flat_outputs *o)
{
    for (Py_ssize_t t = 0; o->buffers && o->scratch && t < s->n_tables; t++) {
        PyMem_RawFree(o->buffers[t].bytes);
        PyMem_RawFree(o->scratch[t]);
    }
    PyMem_RawFree(o->fds);
    PyMem_RawFree(o->buffers);
    PyMem_RawFree(o->scratch);
}

/* flat: None, or per listed table a file descriptor (-1: none). 0, or -1 with an exception set. */
static int take_outputs(const Latest *s, PyObject *flat, flat_outputs *o)
{
    *o = (flat_outputs){NULL, NULL, NULL};
    if (flat == Py_None) return 0;
    if (!PyList_Check(flat) || PyList_GET_SIZE(flat) != s->n_tables) {
        PyErr_SetString(PyExc_ValueError, "flat: a list of one file descriptor (or -1) per listed table");
        return -1;
    }
    size_t n = (size_t)(s->n_tables ? s->n_tables : 1);
    o->fds = PyMem_RawMalloc(n * sizeof(int));
    o->buffers = PyMem_RawCalloc(n, sizeof(flat_buffer));
    o->scratch = PyMem_RawCalloc(n, sizeof(field *));
    if (!o->fds || !o->buffers || !o->scratch) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t t = 0; t < s->n_tables; t++) {
        long fd = PyLong_AsLong(PyList_GET_ITEM(flat, t));
        if (fd == -1 && PyErr_Occurred()) return -1;
        o->fds[t] = s->tables[t].flat && fd >= 0 && fd <= INT32_MAX ? (int)fd : -1;
    }
    return 0;
}

/* A kept line appended in flat form to its table's buffer: 1; 0 if not (it is written as JSON); -1 out of memory. */
static int flattened(const Latest *s, flat_outputs *o, cursor p, cursor end, int in_lake)
{
    field top[FLAT_COUNT];
    if (!read_fields(p, end, top, FLAT_COUNT, flat_wanted, 1) || top[FLAT_DB].kind != STRING
        || top[FLAT_TABLE].kind != STRING)
        return 0;
    Py_ssize_t t = find_listed(s, &top[FLAT_DB], &top[FLAT_TABLE]);
    if (t < 0 || o->fds[t] < 0) return 0;
    if (!o->scratch[t] && !(o->scratch[t] = flat_scratch(s->tables[t].flat))) return -1;
    return flat_line(s->tables[t].flat, o->scratch[t], top, in_lake, &o->buffers[t]);
}

/* A JSON run's bytes written to fd: 0, or -1 (errno). */
static int write_run(int fd, cursor run, cursor stop, int newline, Py_ssize_t *bytes)
{
    *bytes += stop - run + newline;
    return write_all(fd, run, stop - run) < 0 || (newline && write_all(fd, (cursor)"\n", 1) < 0) ? -1 : 0;
}

static PyObject *Latest_write(Latest *s, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t index, stop = -1;
    int fds[2] = {-1, -1}; /* kept lines; kept lines whose key the lake holds (in_lake()), as JSON */
    PyObject *flat = Py_None;
    flat_outputs outputs;
    if (!PyArg_ParseTuple(args, "ny*i|nOi:write", &index, &view, &fds[0], &stop, &flat, &fds[1])) return NULL;
    if (s->marking || (s->marked && fds[1] < 0)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, s->marking ? "write() while in_lake() runs"
                                                       : "write(): lines are marked in the lake: give lake_fd");
        return NULL;
    }
    if (take_outputs(s, flat, &outputs) < 0) {
        free_outputs(s, &outputs);
        PyBuffer_Release(&view);
        return NULL;
    }
    part *in = take_part(s, index, 1, &view, &stop);
    if (!in) {
        free_outputs(s, &outputs);
        return NULL;
    }
    if (s->holding) let_go(s);
    cursor p = view.buf, end = p + stop, run = NULL;
    Py_ssize_t lines = 0, bytes = 0, flat_lines = 0;
    int error = 0, too_many = 0, saved = 0, run_fd = -1;
    Py_BEGIN_ALLOW_THREADS
    while (p < end && !error) {
        cursor nl = memchr(p, '\n', (size_t)(end - p)), next = nl ? nl + 1 : end;
        if (in->written >= in->n_lines) {
            too_many = 1;
            break;
        }
        int mark = in->skip[in->written++], kept = mark != SKIPPED, as_json = kept, fd = fds[mark == IN_LAKE];
        lines++;
        if (kept && outputs.fds) {
            int done = flattened(s, &outputs, p, nl ? nl : end, mark == IN_LAKE);
            if (done < 0) {
                error = 1;
                errno = ENOMEM;
                break;
            }
            as_json = !done;
            flat_lines += done;
        }
        if (run && (!as_json || run_fd != fd)) { /* a run of JSON lines to one file ends before this line */
            error = write_run(run_fd, run, p, 0, &bytes) < 0;
            run = NULL;
        }
        if (as_json && !run) {
            run = p;
            run_fd = fd;
        }
        if (run && !nl && !error) { /* ... or with it, when it has no newline */
            error = write_run(run_fd, run, next, 1, &bytes) < 0;
            run = NULL;
        }
        p = next;
    }
    if (run && !error && !too_many) error = write_run(run_fd, run, p, 0, &bytes) < 0;
    for (Py_ssize_t t = 0; outputs.fds && t < s->n_tables && !error; t++)
        if (outputs.buffers[t].n) error = write_all(outputs.fds[t], outputs.buffers[t].bytes, outputs.buffers[t].n) < 0;
    saved = errno;
    free_outputs(s, &outputs);
    Py_END_ALLOW_THREADS
    in->busy = 0;
    PyBuffer_Release(&view);
    if (too_many) {
        PyErr_SetString(PyExc_ValueError, "write() was given more lines than feed()");
        return NULL;
    }
    if (error) {
        errno = saved;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(nnn)", lines, bytes, flat_lines);
}

static PyMethodDef Latest_methods[] = {
    {"feed", (PyCFunction)Latest_feed, METH_VARARGS,
     "feed(part, buffer, stop=len) -> lines: buffer[:stop] holds whole lines of that part (an input file; the last\n"
     "line may lack its newline). Parts may be fed at once from several threads."},
    {"resolve", (PyCFunction)Latest_resolve, METH_NOARGS,
     "resolve() -> (lines fed, lines skipped): once every part is fed, marks the lines a later change supersedes."},
    {"unique", (PyCFunction)Latest_unique, METH_NOARGS,
     "unique() -> [bool, ...]: once resolved, per listed table, whether the lines kept hold one event per key (its\n"
     "kinds given, every key in the change log's form, none moved, tied or unrecorded; every line read)."},
    {"in_lake", (PyCFunction)Latest_in_lake, METH_VARARGS,
     "in_lake(table, rows, columns) -> lines marked: once resolved and before write(), for a listed table whose kept\n"
     "lines are unique(), marks each kept line whose key is one of a lake version's `rows` keys. columns: per key\n"
     "column, in the table's order, (ints,) a buffer of 64-bit integers or (offsets, data) Arrow text (32-bit\n"
     "offsets). write() then sends marked lines to lake_fd, or in flat form with one field more."},
    {"write", (PyCFunction)Latest_write, METH_VARARGS,
     "write(part, buffer, fd, stop=len, flat=None, lake_fd=-1) -> (lines, bytes, flat lines): the part's lines\n"
     "again, in the order fed; those not skipped are written to fd, each ending with a newline, those in_lake()\n"
     "marked to lake_fd. flat: per listed table a file descriptor (or -1): its kept lines that are plain go there\n"
     "in flat form instead (_flat.c), a marked one with one field more (\"1\")."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LatestType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc.spark._scan.Latest",
    .tp_basicsize = sizeof(Latest),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Latest(merged_upto, [(db, table, [key column, ...], kinds=None, flat=None), ...], parts=1,\n"
              "max_records=unbounded): the change lines a merge need not read. kinds: 'i' (integer) or 's' (text) per\n"
              "key column, for unique(). flat: the other columns the compaction reads, for write()'s flat form.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Latest_init,
    .tp_dealloc = (destructor)Latest_dealloc,
    .tp_methods = Latest_methods,
};
