/* The Latest type (_latest.c), added to the _scan module by _scan.c's init; and the calls through which a Scanner
 * feeds a Latest the lines it reads (one parse of each line for both). */
#ifndef CDC_LATEST_H
#define CDC_LATEST_H

#include "_scan_json.h"

extern PyTypeObject LatestType;

/* The fields a Latest reads of a line, read_fields' numbers; the first four are the Scanner's own (_scan.c). */
enum { L_DB, L_TABLE, L_OP, L_POSITION, L_KEY, L_BEFORE, L_COUNT };

int latest_wanted(cursor key, Py_ssize_t n);
/* Part `index` of `latest` (a Latest) taken for feeding by one thread, as Latest.feed takes it; NULL with an
 * exception set when it cannot be. With the interpreter lock. */
void *latest_claim(PyObject *latest, Py_ssize_t index);
/* One line of a claimed part, as Latest.feed takes it: `fields` its L_COUNT fields if the caller's strict
 * read_fields found them, NULL to read them here. 0, or -1 when out of memory. Without the interpreter lock. */
int latest_line(PyObject *latest, void *part, cursor p, cursor end, const field *fields);
void latest_release(void *part);

#endif
