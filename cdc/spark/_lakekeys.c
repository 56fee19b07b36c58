/* A lake version's keys in the change log's form, so that Latest.in_lake (_latest.c) can tell which kept lines' keys
 * the lake already holds: the compaction then needs no hash table of the lake's keys (cdc.spark.latest, "in_lake").
 *
 * A key written by the change log's writers, in the form canonical_key accepts (names sorted, no whitespace, an
 * integer as -?(0|[1-9][0-9]*), a text of printable ASCII without an escape), is the same key as a lake row's exactly
 * when its bytes are those this file makes from the row's typed values: an integer has one decimal form, and such a
 * text is its own bytes. A lake text that is not printable ASCII, or holds a quote or a backslash, has no such form:
 * no kept line of a table whose keys are all in that form can hold it. */
#include "_lakekeys.h"

static int take_buffer(PyObject *item, Py_buffer *view)
{
    return PyObject_GetBuffer(item, view, PyBUF_SIMPLE);
}

void lake_columns_release(Py_buffer *views, Py_ssize_t n_keys)
{
    for (Py_ssize_t i = 0; i < 2 * n_keys; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
}

int lake_columns_take(PyObject *columns, const key_columns *k, Py_ssize_t rows, Py_buffer *views, lake_column *cols)
{
    memset(views, 0, (size_t)(2 * k->n_keys) * sizeof(Py_buffer));
    if (!PyList_Check(columns) || PyList_GET_SIZE(columns) != k->n_keys) {
        PyErr_SetString(PyExc_ValueError, "columns: one per key column of the table");
        return -1;
    }
    for (Py_ssize_t i = 0; i < k->n_keys; i++) {
        PyObject *c = PyList_GET_ITEM(columns, i);
        Py_ssize_t want = k->kinds[i] == 'i' ? 1 : 2;
        if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != want) {
            PyErr_SetString(PyExc_ValueError, "columns: (ints,) for an integer key column, (offsets, data) for text");
            lake_columns_release(views, k->n_keys);
            return -1;
        }
        for (Py_ssize_t j = 0; j < want; j++) {
            if (take_buffer(PyTuple_GET_ITEM(c, j), &views[2 * i + j]) < 0) {
                lake_columns_release(views, k->n_keys);
                return -1;
            }
        }
        Py_buffer *a = &views[2 * i];
        int short_of_rows = want == 1 ? a->len / 8 < rows : a->len / 4 < rows + 1;
        cols[i] = (lake_column){want == 1 ? a->buf : NULL, want == 2 ? a->buf : NULL,
                                want == 2 ? views[2 * i + 1].buf : NULL, want == 2 ? views[2 * i + 1].len : 0};
        if (short_of_rows || ((uintptr_t)a->buf & (want == 1 ? 7 : 3))) {
            PyErr_SetString(PyExc_ValueError, "columns: a buffer holds fewer rows than given, or is not aligned");
            lake_columns_release(views, k->n_keys);
            return -1;
        }
    }
    return 0;
}

void lake_key_order(const key_columns *k, Py_ssize_t *order)
{
    for (Py_ssize_t i = 0; i < k->n_keys; i++) {
        Py_ssize_t at = i;
        while (at > 0 && compare(k->names + k->key_at[i], k->key_n[i], k->names + k->key_at[order[at - 1]],
                                 k->key_n[order[at - 1]]) < 0) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
}

/* An integer's one decimal form (no sign for 0 or positives): its length. */
static Py_ssize_t decimal(int64_t value, unsigned char *out)
{
    unsigned char digits[20];
    uint64_t v = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    Py_ssize_t n = 0, written = 0;
    do {
        digits[n++] = (unsigned char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (value < 0) out[written++] = '-';
    while (n) out[written++] = digits[--n];
    return written;
}

Py_ssize_t lake_key(const key_columns *k, const Py_ssize_t *order, const lake_column *cols, Py_ssize_t row,
                    unsigned char *out, Py_ssize_t cap)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t j = 0; j < k->n_keys; j++) {
        Py_ssize_t i = order[j], name_n = k->key_n[i];
        if (n + name_n + 4 + 21 > cap) return -1;
        if (j) out[n++] = ',';
        out[n++] = '"';
        memcpy(out + n, k->names + k->key_at[i], (size_t)name_n);
        n += name_n;
        out[n++] = '"';
        out[n++] = ':';
        const lake_column *c = &cols[i];
        if (k->kinds[i] == 'i') {
            n += decimal(c->ints[row], out + n);
            continue;
        }
        int32_t from = c->offsets[row], to = c->offsets[row + 1];
        if (from < 0 || to < from || to > c->data_n || n + (to - from) + 2 > cap) return -1;
        out[n++] = '"';
        for (cursor p = c->data + from, end = c->data + to; p < end; p++) {
            if (*p < 0x20 || *p >= 0x80 || *p == '"' || *p == '\\') return -1;
            out[n++] = *p;
        }
        out[n++] = '"';
    }
    return n;
}
