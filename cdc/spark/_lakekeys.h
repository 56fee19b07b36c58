/* A lake version's keys in the change log's form (_lakekeys.c), for Latest.in_lake (_latest.c). */
#ifndef CDC_LAKEKEYS_H
#define CDC_LAKEKEYS_H

#include "_scan_json.h"

/* One key column of the lake's rows, as Arrow lays it out: 'i' 64-bit integers, or 's' text (32-bit offsets, n + 1 of
 * them, into data). */
typedef struct {
    const int64_t *ints;
    const int32_t *offsets;
    cursor data;
    Py_ssize_t data_n;
} lake_column;

/* A listed table's key columns: their names (in `names` at key_at, key_n) and kinds ('i' or 's'). */
typedef struct {
    cursor names;
    const Py_ssize_t *key_at, *key_n;
    const char *kinds;
    Py_ssize_t n_keys;
} key_columns;

/* `columns` (one per key column: (ints,) or (offsets, data), buffers) taken as `rows` rows into views (2 per column)
 * and cols: 0, or -1 with an exception set (views then released). With the interpreter lock. */
int lake_columns_take(PyObject *columns, const key_columns *k, Py_ssize_t rows, Py_buffer *views, lake_column *cols);
void lake_columns_release(Py_buffer *views, Py_ssize_t n_keys);

/* Row `row`'s key as the change log writes it (the members inside the braces, names sorted: canonical_key's form),
 * in out (cap bytes): its length; -1 when no line in that form can hold it (a text not plain, or too long). order:
 * the key columns by byte order of their names. Without the interpreter lock. */
Py_ssize_t lake_key(const key_columns *k, const Py_ssize_t *order, const lake_column *cols, Py_ssize_t row,
                    unsigned char *out, Py_ssize_t cap);
/* order (n_keys) filled with the key columns' numbers by byte order of their names. */
void lake_key_order(const key_columns *k, Py_ssize_t *order);

#endif
