/* sharecon._speedups: C for the compiled build's per-record path.

   The compiled build (SHARECON_COMPILE=1, see docs/performance.md) builds this module
   beside the modules mypyc compiles; the pure build has no C at all and never imports
   it. Everything here has a Python twin that stays the reference and the fallback:

   RecordLayout  where a record class keeps its slots (checked once: each must be a
                 plain writable object slot).
   RecordMaker   sharecon.record.record_factory's ``make``: one record of a delivery,
                 its slots filled in C, with no Python frame per record (mypyc cannot
                 compile the public Record class without changing what users see:
                 docs/performance.md).

   Nothing here decides anything: which records, their locks and their answers are the
   Python code's, the same in both builds. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX < 0x030A0000
#error "sharecon._speedups needs CPython 3.10 or later"
#endif

/* -- RecordLayout: where a record class keeps its slots ---------------------------------- */

/* The slots RecordMaker fills, in this order: six fixed for a delivery, five per record
   (the arguments of make()), and the delivery count. */
static const char *const SLOT_NAMES[] = {
    "topic", "partition", "topic_partition", "_owner", "lock_deadline", "_batch",
    "offset", "timestamp", "key", "value", "headers",
    "delivery_count",
};
#define N_FIXED 6
#define N_ARGS 5
#define N_SLOTS 12

typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    Py_ssize_t offsets[N_SLOTS];
} RecordLayout;

static int
layout_init(RecordLayout *self, PyObject *args, PyObject *kwds)
{
    PyObject *cls;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "RecordLayout() takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!:RecordLayout", &PyType_Type, &cls)) {
        return -1;
    }
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, SLOT_NAMES[i]);
        if (descr == NULL) {
            return -1;
        }
        /* Only a plain writable object slot may be written by offset: anything else
           (a property, a class attribute, a read-only member) is refused, and the caller
           keeps the Python factory. */
        if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", ((PyTypeObject *)cls)->tp_name,
                         SLOT_NAMES[i]);
            Py_DECREF(descr);
            return -1;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        PyTypeObject *owner = ((PyDescrObject *)descr)->d_type;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) ||
            !PyType_IsSubtype((PyTypeObject *)cls, owner)) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a writable object slot",
                         ((PyTypeObject *)cls)->tp_name, SLOT_NAMES[i]);
            Py_DECREF(descr);
            return -1;
        }
        self->offsets[i] = member->offset;
        Py_DECREF(descr);
    }
    Py_XSETREF(self->cls, (PyTypeObject *)Py_NewRef(cls));
    return 0;
}

static void
layout_dealloc(RecordLayout *self)
{
    Py_XDECREF(self->cls);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject RecordLayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sharecon._speedups.RecordLayout",
    .tp_doc = PyDoc_STR("RecordLayout(cls): where instances of cls keep the slots a "
                        "RecordMaker fills (TypeError if any is not a writable slot)."),
    .tp_basicsize = sizeof(RecordLayout),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)layout_init,
    .tp_dealloc = (destructor)layout_dealloc,
};

/* -- RecordMaker: make(offset, timestamp, key, value, headers) -> record ------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    RecordLayout *layout;
    PyObject *fixed[N_FIXED];
} RecordMaker;

static inline void
put_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject **slot = (PyObject **)((char *)obj + offset);
    PyObject *old = *slot;
    *slot = Py_NewRef(value);
    Py_XDECREF(old);
}

static PyObject *
maker_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    RecordMaker *self = (RecordMaker *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != N_ARGS || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError,
                     "make() takes 5 positional arguments (offset, timestamp, key, value, "
                     "headers), %zd given", nargs);
        return NULL;
    }
    RecordLayout *layout = self->layout;
    PyTypeObject *cls = layout->cls;
    /* As object.__new__(cls): the class's own allocator, which tracks a GC type. */
    PyObject *rec = cls->tp_alloc(cls, 0);
    if (rec == NULL) {
        return NULL;
    }
    const Py_ssize_t *off = layout->offsets;
    for (int i = 0; i < N_FIXED; i++) {
        put_slot(rec, off[i], self->fixed[i]);
    }
    for (int i = 0; i < N_ARGS; i++) {
        put_slot(rec, off[N_FIXED + i], args[i]);
    }
    PyObject *one = PyLong_FromLong(1); /* a cached small int: no allocation */
    put_slot(rec, off[N_SLOTS - 1], one);
    Py_DECREF(one);
    return rec;
}

static PyObject *
maker_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    RecordLayout *layout;
    PyObject *fixed[N_FIXED];
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "RecordMaker() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!OOOOOO:RecordMaker", &RecordLayoutType, &layout, &fixed[0],
                          &fixed[1], &fixed[2], &fixed[3], &fixed[4], &fixed[5])) {
        return NULL;
    }
    if (layout->cls == NULL) {
        PyErr_SetString(PyExc_ValueError, "RecordMaker: the layout was never initialised");
        return NULL;
    }
    RecordMaker *self = (RecordMaker *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = maker_vectorcall;
    self->layout = (RecordLayout *)Py_NewRef(layout);
    for (int i = 0; i < N_FIXED; i++) {
        self->fixed[i] = Py_NewRef(fixed[i]);
    }
    return (PyObject *)self;
}

static int
maker_traverse(RecordMaker *self, visitproc visit, void *arg)
{
    Py_VISIT(self->layout);
    for (int i = 0; i < N_FIXED; i++) {
        Py_VISIT(self->fixed[i]);
    }
    return 0;
}

static int
maker_clear(RecordMaker *self)
{
    Py_CLEAR(self->layout);
    for (int i = 0; i < N_FIXED; i++) {
        Py_CLEAR(self->fixed[i]);
    }
    return 0;
}

static void
maker_dealloc(RecordMaker *self)
{
    PyObject_GC_UnTrack(self);
    maker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject RecordMakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sharecon._speedups.RecordMaker",
    .tp_doc = PyDoc_STR("RecordMaker(layout, topic, partition, topic_partition, owner, "
                        "lock_deadline, batch): make(offset, timestamp, key, value, headers) "
                        "gives the record sharecon.record.record_factory's make() would."),
    .tp_basicsize = sizeof(RecordMaker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(RecordMaker, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = maker_new,
    .tp_traverse = (traverseproc)maker_traverse,
    .tp_clear = (inquiry)maker_clear,
    .tp_dealloc = (destructor)maker_dealloc,
};

/* -- the module ----------------------------------------------------------------------------- */

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sharecon._speedups",
    .m_doc = PyDoc_STR("C helpers of the compiled build's per-record path "
                       "(see sharecon/_speedups.c)."),
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyTypeObject *types[] = {&RecordLayoutType, &RecordMakerType};
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0) {
            Py_DECREF(module);
            return NULL;
        }
        const char *name = strrchr(types[i]->tp_name, '.') + 1;
        if (PyModule_AddObjectRef(module, name, (PyObject *)types[i]) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
