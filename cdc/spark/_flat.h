/* A kept change line in flat form (_flat.c): the fields the compaction reads, tab-separated, for Spark to split
 * instead of parsing JSON. */
#ifndef CDC_FLAT_H
#define CDC_FLAT_H

#include "_scan_json.h"

/* One table's flat layout: its key columns, then the other columns the compaction reads from `after`. */
typedef struct flat_layout flat_layout;

/* A layout from two lists of str (NULL with an exception set). With the interpreter lock. */
flat_layout *flat_layout_new(PyObject *keys, PyObject *values);
void flat_layout_free(flat_layout *layout);
/* Room for one line's values (flat_line's scratch), or NULL when out of memory. */
field *flat_scratch(const flat_layout *layout);

typedef struct {
    unsigned char *bytes;
    Py_ssize_t n, cap;
} flat_buffer;

/* The line's key, before and after objects (top: its members, read_fields' FLAT_* numbers) appended to `out` in flat
 * form, with one field more ("1") where in_lake: 1; 0 if the line is not plain (nothing appended), -1 when out of
 * memory. Without the interpreter lock. */
int flat_line(const flat_layout *layout, field *scratch, const field *top, int in_lake, flat_buffer *out);

/* The top-level members a flat line may hold, read_fields' numbers for flat_wanted; FLAT_OTHER: any other name. */
enum { FLAT_AFTER, FLAT_BEFORE, FLAT_DB, FLAT_KEY, FLAT_OP, FLAT_POSITION, FLAT_SRC, FLAT_TABLE, FLAT_TS, FLAT_V,
       FLAT_OTHER, FLAT_COUNT };
int flat_wanted(cursor name, Py_ssize_t n);

#endif
