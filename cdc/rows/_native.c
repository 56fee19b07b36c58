/* Tail's row decoder in C: a full-image rows-event body -> the finished change lines of its rows (issue 28).
 *
 * It does what cdc.rows.compiled's reader and cdc.capture.rowblock.rows_block do together in Python,
 * following a column program cdc.rows.native builds once per table map: per column one action (an
 * integer, DECIMAL as its exact text, DATETIME2, TIMESTAMP2, TIME2 and DATE as text, YEAR, FLOAT as the
 * shortest decimal that round-trips its 4 bytes and DOUBLE as orjson writes them, BIT as a number, a SET's
 * labels, UTF-8 text validated and escaped as orjson escapes it, text in a single-byte charset (latin1,
 * ascii, cp1250...) through a table of each byte's JSON and in any other charset (ucs2, utf16, utf32, sjis...)
 * through CPython's codec, binary and GEOMETRY in base64, an ENUM's label, MySQL 8's binary JSON as the
 * text MySQL's SELECT shows: _native_json.c), or a call of the column's
 * Python reader and orjson.dumps of its value for every other column (hashed columns, a type whose schema
 * and table map disagree): the output is the Python fast path's, byte for byte.
 *
 * Exactness rule: on anything this code is not sure of (bytes past the end of the body, invalid UTF-8,
 * bytes a charset refuses, a DECIMAL group out of its range, a FLOAT whose shortest digits are not found,
 * a JSON offset past its document or a JSON type it does not know,
 * a Python reader that raised) it raises, and the caller decodes the event through the Python path (the
 * oracle), which gives the lines or names the column and row.
 * It never reads outside the body: every read is checked against its end first.
 */
#include "_native.h"

/* Raised when this file changes what the Python side passes (cdc/rows/native.py). */
#define ABI_VERSION 6

/* Start `b` as a bytes object of `cap` bytes, to be cut to its length by buf_result. */
static int buf_start_bytes(Buf *b, Py_ssize_t cap) {
    b->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (!b->bytes) return -1;
    b->data = PyBytes_AS_STRING(b->bytes);
    b->len = 0;
    b->cap = cap;
    return 0;
}

/* The bytes object of a buf_start_bytes buffer, cut to what was written (a new reference), or NULL. */
static PyObject *buf_result(Buf *b) {
    PyObject *bytes = b->bytes;
    b->bytes = NULL;
    if (bytes && _PyBytes_Resize(&bytes, b->len) < 0) return NULL;
    return bytes;
}

/* {"name":value,...} of one image, columns in `names` order. */
static int put_object(Buf *out, PyObject *names, const Py_ssize_t *index, const Buf *scratch, const Span *spans) {
    Py_ssize_t count = PyTuple_GET_SIZE(names), size = count + 1;
    for (Py_ssize_t k = 0; k < count; k++)
        size += PyBytes_GET_SIZE(PyTuple_GET_ITEM(PyTuple_GET_ITEM(names, k), 1)) + spans[index[k]].len;
    if (buf_reserve(out, size) < 0) return -1; /* once per object, not per piece */
    char *w = out->data + out->len;
    *w++ = '{';
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *name = PyTuple_GET_ITEM(PyTuple_GET_ITEM(names, k), 1);
        const Span *span = &spans[index[k]];
        if (k) *w++ = ',';
        memcpy(w, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name));
        w += PyBytes_GET_SIZE(name);
        memcpy(w, scratch->data + span->start, span->len);
        w += span->len;
    }
    *w++ = '}';
    out->len = w - out->data;
    return 0;
}

static void plan_free(PyObject *capsule) {
    Plan *plan = PyCapsule_GetPointer(capsule, "cdc.rows.plan");
    if (!plan) return;
    for (Py_ssize_t i = 0; i < plan->ncols; i++) Py_XDECREF(plan->cols[i].extra);
    PyMem_Free(plan->cols);
    PyMem_Free(plan->name_index);
    PyMem_Free(plan->key_index);
    Py_XDECREF(plan->names);
    Py_XDECREF(plan->keys);
    Py_XDECREF(plan->dumps);
    PyMem_Free(plan);
}

static int check_entries(PyObject *entries, Py_ssize_t ncols) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(entries); k++) {
        PyObject *entry = PyTuple_GET_ITEM(entries, k);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "an image entry is (column index, bytes)");
            return -1;
        }
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
        if (i < 0 || i >= ncols) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an image entry names no column");
            return -1;
        }
    }
    return 0;
}

static int parse_column(PyObject *spec, Column *c) {
    PyObject *extra;
    if (!PyArg_ParseTuple(spec, "illO", &c->action, &c->a, &c->b, &extra)) return -1;
    int ok;
    switch (c->action) {
    case A_PYTHON: ok = PyCallable_Check(extra); break;
    case A_INT: ok = c->a == 1 || c->a == 2 || c->a == 3 || c->a == 4 || c->a == 8; break;
    case A_DECIMAL: ok = c->a > 0 && c->a <= 65 && c->b >= 0 && c->b <= 30 && c->b <= c->a; break;
    case A_JSON: ok = c->a >= 1 && c->a <= 4; break;
    case A_TEXT: case A_BASE64: ok = c->a >= 1 && c->a <= 4 && c->b >= 0 && c->b <= 255; break;
    case A_DATETIME2: ok = c->a >= 0 && c->a <= 3 && c->b >= 0 && c->b <= 1000000; break;
    case A_DATE: case A_YEAR: ok = 1; break;
    case A_TIMESTAMP2: case A_TIME2: ok = c->a >= 0 && c->a <= 3 && (c->b == 0 || c->b == 1); break;
    case A_ENUM: case A_SET: {
        ok = c->a >= 1 && c->a <= 8 && PyTuple_Check(extra) &&
             (c->action == A_SET ? PyTuple_GET_SIZE(extra) <= 64 : PyTuple_GET_SIZE(extra) > 0);
        for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(extra); i++) ok = PyBytes_Check(PyTuple_GET_ITEM(extra, i));
        break;
    }
    case A_FLOAT: case A_DOUBLE: ok = 1; break;
    case A_BIT: ok = c->a >= 1 && c->a <= 8; break;
    case A_CHARMAP: {
        ok = c->a >= 1 && c->a <= 4 && PyBytes_Check(extra) && PyBytes_GET_SIZE(extra) == 256 * CHARMAP_ENTRY;
        for (int i = 0; ok && i < 256; i++) ok = (unsigned char)PyBytes_AS_STRING(extra)[i * CHARMAP_ENTRY] < CHARMAP_ENTRY;
        break;
    }
    case A_CODEC: ok = c->a >= 1 && c->a <= 4 && PyUnicode_Check(extra); break;
    default: ok = 0;
    }
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "bad column program entry (action %d)", c->action);
        return -1;
    }
    Py_INCREF(extra);
    c->extra = extra;
    return 0;
}

/* The column index of every (index, name) entry (check_entries checked them), or NULL with an error set. */
static Py_ssize_t *entry_indexes(PyObject *entries) {
    Py_ssize_t count = PyTuple_GET_SIZE(entries);
    Py_ssize_t *index = PyMem_Calloc(count ? count : 1, sizeof(Py_ssize_t));
    if (!index) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t k = 0; k < count; k++) index[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyTuple_GET_ITEM(entries, k), 0));
    return index;
}

/* compile(columns, names, keys, dumps) -> a plan: columns is one (action, a, b, extra) per table-map column. */
static PyObject *compile_plan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *columns, *names, *keys, *dumps;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyTuple_Type, &columns, &PyTuple_Type, &names, &PyTuple_Type, &keys, &dumps))
        return NULL;
    Py_ssize_t ncols = PyTuple_GET_SIZE(columns);
    if (ncols == 0 || check_entries(names, ncols) < 0 || check_entries(keys, ncols) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a plan needs columns");
        return NULL;
    }
    Plan *plan = PyMem_Calloc(1, sizeof(Plan));
    if (!plan) return PyErr_NoMemory();
    plan->cols = PyMem_Calloc(ncols, sizeof(Column));
    if (!plan->cols) { PyMem_Free(plan); return PyErr_NoMemory(); }
    Py_INCREF(names); Py_INCREF(keys); Py_INCREF(dumps);
    plan->names = names; plan->keys = keys; plan->dumps = dumps;
    PyObject *capsule = PyCapsule_New(plan, "cdc.rows.plan", plan_free);
    if (!capsule) {
        Py_DECREF(names); Py_DECREF(keys); Py_DECREF(dumps);
        PyMem_Free(plan->cols); PyMem_Free(plan);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ncols; i++) {
        if (parse_column(PyTuple_GET_ITEM(columns, i), &plan->cols[i]) < 0) { Py_DECREF(capsule); return NULL; }
        plan->ncols = i + 1; /* plan_free releases the columns parsed so far */
    }
    if (!(plan->name_index = entry_indexes(names)) || !(plan->key_index = entry_indexes(keys))) {
        Py_DECREF(capsule);
        return NULL;
    }
    return capsule;
}

static int put_bytes(Buf *out, PyObject *b) { return buf_put(out, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)); }

/* rows(plan, body, op, first, p1, p2, p3, p4) -> (lines, count): every row's line from `first` on,
 * {"after":A,"before":B <p1> K <p2> %012d <p3> %d <p4> (cdc.capture.nativeblock builds the pieces). */
static PyObject *rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *body, *p1, *p2, *p3, *p4;
    int op;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "OO!CnO!O!O!O!", &capsule, &PyBytes_Type, &body, &op, &first, &PyBytes_Type, &p1,
                          &PyBytes_Type, &p2, &PyBytes_Type, &p3, &PyBytes_Type, &p4))
        return NULL;
    Plan *plan = PyCapsule_GetPointer(capsule, "cdc.rows.plan");
    if (!plan) return NULL;
    if (op != 'c' && op != 'u' && op != 'd') return PyErr_Format(PyExc_ValueError, "unknown rows-event op %c", op);
    Buf out = {0}, before = {0}, after = {0};
    Span *spans = PyMem_Calloc(2 * plan->ncols, sizeof(Span));
    if (!spans) return PyErr_NoMemory();
    if (buf_start_bytes(&out, 2 * PyBytes_GET_SIZE(body) + 4096) < 0) { PyMem_Free(spans); return NULL; }
    Span *bspans = spans, *aspans = spans + plan->ncols;
    Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(body), index = 0;
    PyObject *result = NULL;
    char digits[32];
    for (; pos < end; index++) {
        before.len = after.len = 0;
        if (op != 'c' && read_image(plan, body, &pos, &before, bspans) < 0) goto done;
        if (op != 'd' && read_image(plan, body, &pos, &after, aspans) < 0) goto done;
        if (index < first) continue;
        const Buf *row = op == 'd' ? &before : &after;
        const Span *rspans = op == 'd' ? bspans : aspans;
        if (buf_put(&out, "{\"after\":", 9) < 0) goto done;
        if (op == 'd' ? buf_put(&out, "null", 4) < 0 : put_object(&out, plan->names, plan->name_index, &after, aspans) < 0) goto done;
        if (buf_put(&out, ",\"before\":", 10) < 0) goto done;
        if (op == 'c' ? buf_put(&out, "null", 4) < 0 : put_object(&out, plan->names, plan->name_index, &before, bspans) < 0) goto done;
        if (put_bytes(&out, p1) < 0 || put_object(&out, plan->keys, plan->key_index, row, rspans) < 0 || put_bytes(&out, p2) < 0)
            goto done;
        Py_ssize_t n = digits_at(digits, (uint64_t)index, 12) - digits;
        if (buf_put(&out, digits, n) < 0 || put_bytes(&out, p3) < 0) goto done;
        n = digits_at(digits, (uint64_t)index, 1) - digits;
        if (buf_put(&out, digits, n) < 0 || put_bytes(&out, p4) < 0) goto done;
    }
    PyObject *lines = buf_result(&out);
    if (lines) result = Py_BuildValue("(Nn)", lines, index > first ? index - first : 0);
done:
    Py_XDECREF(out.bytes);
    PyMem_Free(before.data);
    PyMem_Free(after.data);
    PyMem_Free(spans);
    return result;
}

/* One block's lines into `out`, its markers replaced by xid and end. */
static int fill_block(Buf *out, const char *p, const char *stop, PyObject *xid, PyObject *end) {
    const char *zero = memchr(p, 0, (size_t)(stop - p)), *one = memchr(p, 1, (size_t)(stop - p));
    while (zero || one) {
        int is_zero = zero && (!one || zero < one);
        const char *mark = is_zero ? zero : one;
        if (buf_put(out, p, mark - p) < 0 || put_bytes(out, is_zero ? xid : end) < 0) return -1;
        p = mark + 1;
        if (is_zero) zero = memchr(p, 0, (size_t)(stop - p));
        else one = memchr(p, 1, (size_t)(stop - p));
    }
    return buf_put(out, p, stop - p);
}

/* finish(blocks, xid, end) -> b"".join(blocks).replace(b"\x00", xid).replace(b"\x01", end) in one pass: the
 * commit's fields put into a transaction's lines (cdc.capture.txn; the markers occur nowhere else in a line).
 * `blocks` is one bytes-like block or a list of them: a transaction's blocks become one write, not one each. */
static PyObject *finish(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *blocks, *xid, *end;
    if (!PyArg_ParseTuple(args, "OSS", &blocks, &xid, &end)) return NULL;
    int many = PyList_Check(blocks);
    Py_ssize_t count = many ? PyList_GET_SIZE(blocks) : 1, size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t n = PyObject_Size(many ? PyList_GET_ITEM(blocks, i) : blocks);
        if (n < 0) return NULL;
        size += n;
    }
    Buf out = {0};
    if (buf_start_bytes(&out, size + size / 4 + 64) < 0) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_buffer block;
        if (PyObject_GetBuffer(many ? PyList_GET_ITEM(blocks, i) : blocks, &block, PyBUF_SIMPLE) < 0) goto failed;
        int rc = fill_block(&out, block.buf, (const char *)block.buf + block.len, xid, end);
        PyBuffer_Release(&block);
        if (rc < 0) goto failed;
    }
    return buf_result(&out);
failed:
    Py_XDECREF(out.bytes);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"finish", finish, METH_VARARGS, "finish(blocks, xid, end) -> the block(s) joined, markers replaced"},
    {"compile", compile_plan, METH_VARARGS, "compile(columns, names, keys, dumps) -> plan"},
    {"rows", rows, METH_VARARGS, "rows(plan, body, op, first, p1, p2, p3, p4) -> (lines, count)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__native(void) {
    base64_init();
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    const struct { const char *name; long value; } constants[] = {
        {"ABI_VERSION", ABI_VERSION}, {"PYTHON", A_PYTHON}, {"INT", A_INT}, {"DECIMAL", A_DECIMAL}, {"TEXT", A_TEXT},
        {"BASE64", A_BASE64}, {"DATETIME2", A_DATETIME2}, {"DATE", A_DATE}, {"ENUM", A_ENUM}, {"YEAR", A_YEAR},
        {"TIMESTAMP2", A_TIMESTAMP2}, {"TIME2", A_TIME2}, {"FLOAT", A_FLOAT}, {"DOUBLE", A_DOUBLE}, {"BIT", A_BIT},
        {"SET", A_SET}, {"CHARMAP", A_CHARMAP}, {"CODEC", A_CODEC}, {"JSON", A_JSON},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
        if (PyModule_AddIntConstant(module, constants[i].name, constants[i].value) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
