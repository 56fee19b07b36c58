/* A binary-protocol row turned into the text-protocol row the server would have sent (cdc/snapshot/binary.py
 * is the reference; tests/snapshot/test_binary.py holds the two byte for byte). Compiled into the snapshot's
 * C reader (cdc/snapshot/_native.c), which reads the text rows this makes.
 */
#ifndef CDC_SNAPSHOT_NATIVE_BINARY_H
#define CDC_SNAPSHOT_NATIVE_BINARY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One column of a binary row: its field type, signedness, fraction digits, zero-padded width (else 0), and
 * whether a DOUBLE's change-log text is its JSON number as it stands (no column rule, no fragment of its own). */
typedef struct {
    unsigned char code, is_unsigned, decimals, json;
    unsigned short zerofill;
} WireType;

/* A growing buffer holding one text row payload. */
typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
} TextRow;

/* The binary row payload b[0:n] as a text row payload in out (its data reused across calls). `json`: 0, every
 * value as the server's text; 1 or 2, a `json` DOUBLE column's value as orjson writes it (2: exponents too).
 * 0; 1: a DOUBLE this cannot write as JSON (ask again with json 0); -1 with a ValueError set (not a whole binary
 * row of these columns); -2 with another error set. */
int binary_to_text(const unsigned char *b, Py_ssize_t n, const WireType *types, Py_ssize_t ncols, int json,
                   TextRow *out);

/* Whether a column of this field type and fraction digits can be read from binary rows. */
int binary_type_known(int code, int decimals);

#endif
