/*
 * zarr_dask._native: read and decode a batch of small local chunks with the GIL released once.
 *
 * Why this exists: with 16 KiB chunks, the Python read path drops and retakes the GIL about six times per
 * chunk (open, fstat, preadv, close, decompress, copy). On a 2-core machine two reader threads then spend
 * their time handing the GIL to each other, and reach 1.4x of one thread instead of 2x. Here one call does
 * the whole batch -- open, read, decompress, copy into the output block, or fill a missing chunk -- without
 * Python, so the threads run in parallel.
 *
 * The codecs are numcodecs' own: zstd, blosc and lz4 are resolved from the numcodecs extension modules with
 * dlsym (bind()), so the bytes are decoded by exactly the library code numcodecs would run. Nothing here
 * raises a decode error: a chunk this code cannot handle exactly (a decode failure, a size that does not
 * match, a symbolic link, an I/O error, a file larger than the read buffer) is reported back, and the caller
 * redoes it on the Python path, which produces the library's usual errors and results. So the fast path can
 * only ever be faster, never different.
 *
 * The module has no Python-level state besides the bound function pointers, and uses no NumPy C API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAXDIM 32

enum { CODEC_RAW = 0, CODEC_ZSTD = 1, CODEC_BLOSC = 2, CODEC_LZ4 = 3 };
enum { ST_OK = 0, ST_MISSING = 1, ST_PYTHON = 2 };

typedef void *(*zstd_create_t)(void);
typedef size_t (*zstd_free_t)(void *);
typedef size_t (*zstd_decompress_t)(void *, void *, size_t, const void *, size_t);
typedef unsigned (*zstd_is_error_t)(size_t);
typedef unsigned long long (*zstd_content_size_t)(const void *, size_t);
typedef int (*blosc_decompress_t)(const void *, void *, size_t, int);
typedef int (*lz4_decompress_t)(const char *, char *, int, int);

static struct {
    zstd_create_t create;
    zstd_free_t free;
    zstd_decompress_t decompress;
    zstd_is_error_t is_error;
    zstd_content_size_t content_size;
} zstd;
static blosc_decompress_t blosc_decompress_ctx;
static lz4_decompress_t lz4_decompress_safe;

#define ZSTD_CONTENTSIZE_UNKNOWN (0ULL - 1)
#define ZSTD_CONTENTSIZE_ERROR (0ULL - 2)

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* ------------------------------------------------------------------------------------------------ bind */

static PyObject *native_bind(PyObject *self, PyObject *args) {
    const char *name;
    PyObject *path_obj;
    if (!PyArg_ParseTuple(args, "sO&", &name, PyUnicode_FSConverter, &path_obj)) return NULL;
    void *lib = dlopen(PyBytes_AS_STRING(path_obj), RTLD_NOW | RTLD_LOCAL);  /* already loaded: no new copy */
    Py_DECREF(path_obj);
    if (lib == NULL) Py_RETURN_FALSE;
    int ok = 0;
    if (strcmp(name, "zstd") == 0) {
        zstd_create_t create = (zstd_create_t)dlsym(lib, "ZSTD_createDCtx");
        zstd_free_t free_ = (zstd_free_t)dlsym(lib, "ZSTD_freeDCtx");
        zstd_decompress_t decompress = (zstd_decompress_t)dlsym(lib, "ZSTD_decompressDCtx");
        zstd_is_error_t is_error = (zstd_is_error_t)dlsym(lib, "ZSTD_isError");
        zstd_content_size_t content_size = (zstd_content_size_t)dlsym(lib, "ZSTD_getFrameContentSize");
        ok = create && free_ && decompress && is_error && content_size;
        if (ok) {
            zstd.create = create;
            zstd.free = free_;
            zstd.decompress = decompress;
            zstd.is_error = is_error;
            zstd.content_size = content_size;
        }
    } else if (strcmp(name, "blosc") == 0) {
        blosc_decompress_t fn = (blosc_decompress_t)dlsym(lib, "blosc_decompress_ctx");
        ok = fn != NULL;
        if (ok) blosc_decompress_ctx = fn;
    } else if (strcmp(name, "lz4") == 0) {
        lz4_decompress_t fn = (lz4_decompress_t)dlsym(lib, "LZ4_decompress_safe");
        ok = fn != NULL;
        if (ok) lz4_decompress_safe = fn;
    }
    /* the handle is never closed: numcodecs keeps the library loaded for the life of the process anyway */
    if (ok) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* ------------------------------------------------------------------------------------------------ copy */

/* Copy a box of cnt[0] x ... x cnt[nd-1] items between two strided layouts. */
static void copy_box(char *dst, const Py_ssize_t *dstr, const char *src, const Py_ssize_t *sstr,
                     const Py_ssize_t *cnt, int nd, Py_ssize_t isz) {
    if (nd == 0) {
        memcpy(dst, src, (size_t)isz);
        return;
    }
    for (int d = 0; d < nd; d++)
        if (cnt[d] <= 0) return;
    const int last = nd - 1;
    const Py_ssize_t inner = cnt[last];
    const int contiguous = dstr[last] == isz && sstr[last] == isz;
    Py_ssize_t idx[MAXDIM] = {0};
    for (;;) {
        if (contiguous) {
            memcpy(dst, src, (size_t)(inner * isz));
        } else {
            char *dp = dst;
            const char *sp = src;
            for (Py_ssize_t k = 0; k < inner; k++, dp += dstr[last], sp += sstr[last]) memcpy(dp, sp, (size_t)isz);
        }
        int d = last - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            dst += dstr[d];
            src += sstr[d];
            if (idx[d] < cnt[d]) break;
            dst -= dstr[d] * cnt[d];
            src -= sstr[d] * cnt[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

/* Fill a strided box with one item's bytes. */
static void fill_box(char *dst, const Py_ssize_t *dstr, const Py_ssize_t *cnt, int nd, const char *item,
                     Py_ssize_t isz) {
    if (nd == 0) {
        memcpy(dst, item, (size_t)isz);
        return;
    }
    for (int d = 0; d < nd; d++)
        if (cnt[d] <= 0) return;
    const int last = nd - 1;
    const Py_ssize_t inner = cnt[last];
    Py_ssize_t idx[MAXDIM] = {0};
    for (;;) {
        if (dstr[last] == isz) { /* one item, then doubling copies of what is already written */
            memcpy(dst, item, (size_t)isz);
            Py_ssize_t done = 1;
            while (done < inner) {
                Py_ssize_t n = done < inner - done ? done : inner - done;
                memcpy(dst + done * isz, dst, (size_t)(n * isz));
                done += n;
            }
        } else {
            char *dp = dst;
            for (Py_ssize_t k = 0; k < inner; k++, dp += dstr[last]) memcpy(dp, item, (size_t)isz);
        }
        int d = last - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            dst += dstr[d];
            if (idx[d] < cnt[d]) break;
            dst -= dstr[d] * cnt[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

/* ---------------------------------------------------------------------------------------------- decode */

/* Decode one stored chunk of n bytes into exactly nbytes at dst; 0 on success, -1 for "let Python do it". */
static int decode(int codec, void *dctx, const unsigned char *src, size_t n, char *dst, size_t nbytes) {
    switch (codec) {
    case CODEC_RAW:
        if (n != nbytes) return -1;
        memcpy(dst, src, n);
        return 0;
    case CODEC_ZSTD: {
        if (dctx == NULL) return -1;
        if (n >= 4 && le32(src) == 0xFD2FB528u) { /* a declared content size must be the chunk's */
            unsigned long long declared = zstd.content_size(src, n);
            if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR && declared != nbytes)
                return -1;
        }
        size_t r = zstd.decompress(dctx, dst, nbytes, src, n);
        return (zstd.is_error(r) || r != nbytes) ? -1 : 0;
    }
    case CODEC_BLOSC: {
        if (n < 16 || le32(src + 4) != nbytes || le32(src + 12) > n || nbytes > INT_MAX) return -1;
        int r = blosc_decompress_ctx(src, dst, nbytes, 1);
        return (r < 0 || (size_t)r != nbytes) ? -1 : 0;
    }
    case CODEC_LZ4: {
        if (n < 4 || n - 4 > INT_MAX || nbytes > INT_MAX || le32(src) != nbytes) return -1;
        int r = lz4_decompress_safe((const char *)src + 4, dst, (int)(n - 4), (int)nbytes);
        return (r < 0 || (size_t)r != nbytes) ? -1 : 0;
    }
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------ read_chunks */

/* Where a chunk's selected part goes: four per-axis arrays (nd entries each) in one allocation of 4 * nd. */
typedef struct {
    Py_ssize_t *cstart, *cstep, *count, *ostart;
    int whole; /* the chunk is read entirely (start 0, step 1, full extent along every axis) */
} Placement;

/* Parse one projection (coords, chunk_sel, out_sel, complete) against the chunk and output shapes. */
static int parse_projection(PyObject *p, int nd, const Py_ssize_t *cshape, const Py_ssize_t *oshape,
                            Placement *pl) {
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) < 3) {
        PyErr_SetString(PyExc_TypeError, "a projection is a (coords, chunk_sel, out_sel, ...) tuple");
        return -1;
    }
    PyObject *csel = PyTuple_GET_ITEM(p, 1), *osel = PyTuple_GET_ITEM(p, 2);
    if (!PyTuple_Check(csel) || !PyTuple_Check(osel) || PyTuple_GET_SIZE(csel) != nd ||
        PyTuple_GET_SIZE(osel) != nd) {
        PyErr_SetString(PyExc_ValueError, "chunk_sel and out_sel must be tuples of one slice per axis");
        return -1;
    }
    pl->whole = 1;
    for (int d = 0; d < nd; d++) {
        Py_ssize_t start, stop, step, ostart, ostop, ostep;
        PyObject *cs = PyTuple_GET_ITEM(csel, d), *os = PyTuple_GET_ITEM(osel, d);
        if (!PySlice_Check(cs) || !PySlice_Check(os)) {
            PyErr_SetString(PyExc_TypeError, "chunk_sel and out_sel must hold slices");
            return -1;
        }
        if (PySlice_Unpack(cs, &start, &stop, &step) < 0 || PySlice_Unpack(os, &ostart, &ostop, &ostep) < 0)
            return -1;
        Py_ssize_t n = PySlice_AdjustIndices(cshape[d], &start, &stop, step);
        Py_ssize_t on = PySlice_AdjustIndices(oshape[d], &ostart, &ostop, ostep);
        if (step <= 0 || ostep != 1 || n != on) {
            PyErr_SetString(PyExc_ValueError, "a projection's slices do not match (or step backwards)");
            return -1;
        }
        pl->cstart[d] = start;
        pl->cstep[d] = step;
        pl->count[d] = n;
        pl->ostart[d] = ostart;
        if (start != 0 || step != 1 || n != cshape[d]) pl->whole = 0;
    }
    return 0;
}

/* Read a whole regular file into buf (capacity cap); returns its size, -1 missing, -2 for the Python path. */
static Py_ssize_t read_file(const char *path, int flags, unsigned char *buf, size_t cap) {
    int fd;
    do {
        fd = open(path, flags);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) ? -1 : -2;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -2;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > cap) {
        close(fd);
        return -2;
    }
    size_t size = (size_t)st.st_size, got = 0;
    while (got < size) {
        ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
        if (r < 0) {
            if (errno == EINTR) continue;
            close(fd);
            return -2;
        }
        if (r == 0) break; /* the file shrank since fstat: what is there is the value, as on the Python path */
        got += (size_t)r;
    }
    close(fd);
    return (Py_ssize_t)got;
}

/* What both entry points share: the output, the chunk geometry, the parsed projections and the scratch. */
typedef struct {
    int codec, nd;
    Py_ssize_t n, isz, nbytes;
    Py_ssize_t cshape[MAXDIM], cstrides[MAXDIM];
    Py_buffer out, chunkbuf, fill;
    int have_out, have_chunkbuf, have_fill;
    Placement *places;
    Py_ssize_t *axes;
    unsigned char *status;
} Batch;

static void batch_free(Batch *b) {
    PyMem_Free(b->places);
    PyMem_Free(b->axes);
    PyMem_Free(b->status);
    if (b->have_out) PyBuffer_Release(&b->out);
    if (b->have_chunkbuf) PyBuffer_Release(&b->chunkbuf);
    if (b->have_fill) PyBuffer_Release(&b->fill);
}

/* Check the arguments and parse every projection (with the GIL held); -1 with an exception set on failure. */
static int batch_init(Batch *b, Py_ssize_t n, PyObject *projections, PyObject *out_obj, PyObject *shape_obj,
                      int codec, PyObject *fill_obj, PyObject *chunkbuf_obj) {
    memset(b, 0, sizeof(*b));
    b->n = n;
    b->codec = codec;
    if (PyList_GET_SIZE(projections) != n) {
        PyErr_SetString(PyExc_ValueError, "the sources and the projections differ in length");
        return -1;
    }
    if ((codec == CODEC_ZSTD && zstd.decompress == NULL) || (codec == CODEC_BLOSC && blosc_decompress_ctx == NULL) ||
        (codec == CODEC_LZ4 && lz4_decompress_safe == NULL) || codec < 0 || codec > CODEC_LZ4) {
        PyErr_Format(PyExc_ValueError, "codec %d is not bound", codec);
        return -1;
    }
    if (PyObject_GetBuffer(out_obj, &b->out, PyBUF_RECORDS) < 0) return -1;
    b->have_out = 1;
    if (PyObject_GetBuffer(chunkbuf_obj, &b->chunkbuf, PyBUF_WRITABLE) < 0) return -1;
    b->have_chunkbuf = 1;
    if (PyObject_GetBuffer(fill_obj, &b->fill, PyBUF_SIMPLE) < 0) return -1;
    b->have_fill = 1;
    const int nd = b->nd = b->out.ndim;
    b->isz = b->out.itemsize;
    if (nd > MAXDIM || !PyTuple_Check(shape_obj) || PyTuple_GET_SIZE(shape_obj) != nd || b->fill.len != b->isz) {
        PyErr_SetString(PyExc_ValueError, "out, chunk_shape and fill do not agree");
        return -1;
    }
    b->nbytes = b->isz;
    for (int d = nd - 1; d >= 0; d--) {
        b->cshape[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape_obj, d));
        if (b->cshape[d] < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "negative chunk shape");
            return -1;
        }
        b->cstrides[d] = b->nbytes;
        b->nbytes *= b->cshape[d];
    }
    if (b->chunkbuf.len < b->nbytes) {
        PyErr_SetString(PyExc_ValueError, "chunkbuf is smaller than one chunk");
        return -1;
    }
    b->places = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Placement));
    b->axes = PyMem_Malloc((size_t)(n ? n : 1) * 4 * (size_t)(nd ? nd : 1) * sizeof(Py_ssize_t));
    b->status = PyMem_Malloc((size_t)(n ? n : 1));
    if (!b->places || !b->axes || !b->status) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Placement *pl = &b->places[i];
        Py_ssize_t *a = b->axes + i * 4 * nd;
        pl->cstart = a;
        pl->cstep = a + nd;
        pl->count = a + 2 * nd;
        pl->ostart = a + 3 * nd;
        if (parse_projection(PyList_GET_ITEM(projections, i), nd, b->cshape, b->out.shape, pl) < 0) return -1;
        for (int d = 0; d < nd; d++) { /* every write stays inside out */
            if (pl->ostart[d] + pl->count[d] > b->out.shape[d]) {
                PyErr_SetString(PyExc_ValueError, "a projection reaches outside out");
                return -1;
            }
        }
    }
    return 0;
}

/* Where chunk i's selected part starts in out. */
static char *batch_target(const Batch *b, Py_ssize_t i) {
    char *dst = (char *)b->out.buf;
    for (int d = 0; d < b->nd; d++) dst += b->places[i].ostart[d] * b->out.strides[d];
    return dst;
}

static void batch_fill(Batch *b, Py_ssize_t i) {
    fill_box(batch_target(b, i), b->out.strides, b->places[i].count, b->nd, b->fill.buf, b->isz);
    b->status[i] = ST_MISSING;
}

/* Decode chunk i from its stored bytes and place it (without the GIL): straight into out when the chunk is
   whole and its place there is one contiguous run, else through chunkbuf. Sets and returns its status. */
static int batch_place(Batch *b, Py_ssize_t i, void *dctx, const unsigned char *src, size_t size) {
    const Placement *pl = &b->places[i];
    const int nd = b->nd;
    char *dst = batch_target(b, i);
    int direct = pl->whole;
    Py_ssize_t expect = b->isz;
    for (int d = nd - 1; d >= 0 && direct; d--) {
        if (pl->count[d] > 1 && b->out.strides[d] != expect) direct = 0;
        expect *= pl->count[d];
    }
    if (decode(b->codec, dctx, src, size, direct ? dst : (char *)b->chunkbuf.buf, (size_t)b->nbytes))
        return b->status[i] = ST_PYTHON;
    if (!direct) {
        const char *from = (const char *)b->chunkbuf.buf;
        Py_ssize_t sstr[MAXDIM];
        for (int d = 0; d < nd; d++) {
            from += pl->cstart[d] * b->cstrides[d];
            sstr[d] = pl->cstep[d] * b->cstrides[d];
        }
        copy_box(dst, b->out.strides, from, sstr, pl->count, nd, b->isz);
    }
    return b->status[i] = ST_OK;
}

/* The indices left for the Python path, as a list. */
static PyObject *batch_left(const Batch *b) {
    PyObject *left = PyList_New(0);
    if (left == NULL) return NULL;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        if (b->status[i] != ST_PYTHON) continue;
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL || PyList_Append(left, index) < 0) {
            Py_XDECREF(index);
            Py_DECREF(left);
            return NULL;
        }
        Py_DECREF(index);
    }
    return left;
}

PyDoc_STRVAR(read_chunks_doc,
"read_chunks(paths, projections, out, chunk_shape, codec, fill, readbuf, chunkbuf, flags)\n"
"--\n\n"
"Read, decode and place a batch of chunks into ``out`` with the GIL released.\n\n"
"``paths[i]`` is the file of ``projections[i]`` (None: known missing); ``out`` is a writable buffer with\n"
"one axis per chunk axis; ``codec`` 0 raw, 1 zstd, 2 blosc, 3 lz4; ``fill`` one item's bytes, written\n"
"where a chunk is missing; ``readbuf`` holds one stored chunk (larger files go to the Python path);\n"
"``chunkbuf`` holds one decoded chunk; ``flags`` are the ``os.open`` flags.\n"
"Returns ``(files_read, bytes_read, left)``: ``left`` lists the indices this call left untouched\n"
"for the Python path (a decode it cannot do exactly, a symbolic link, an I/O error, a large file).");

static PyObject *native_read_chunks(PyObject *self, PyObject *args) {
    PyObject *paths, *projections, *out_obj, *shape_obj, *fill_obj, *readbuf_obj, *chunkbuf_obj;
    int codec, flags;
    if (!PyArg_ParseTuple(args, "O!O!OOiOOOi", &PyList_Type, &paths, &PyList_Type, &projections, &out_obj,
                          &shape_obj, &codec, &fill_obj, &readbuf_obj, &chunkbuf_obj, &flags))
        return NULL;
    const Py_ssize_t n = PyList_GET_SIZE(paths);
    PyObject *result = NULL, **encoded = NULL;
    Py_buffer readbuf = {0};
    int have_read = 0;
    Batch b;
    if (batch_init(&b, n, projections, out_obj, shape_obj, codec, fill_obj, chunkbuf_obj) < 0) goto done;
    if (PyObject_GetBuffer(readbuf_obj, &readbuf, PyBUF_WRITABLE) < 0) goto done;
    have_read = 1;
    encoded = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    if (encoded == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *path = PyList_GET_ITEM(paths, i);
        if (path != Py_None && !PyUnicode_FSConverter(path, &encoded[i])) goto done;
    }

    Py_ssize_t files = 0, total = 0;
    Py_BEGIN_ALLOW_THREADS
    void *dctx = codec == CODEC_ZSTD ? zstd.create() : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = encoded[i] == NULL ? -1
                                             : read_file(PyBytes_AS_STRING(encoded[i]), flags, readbuf.buf,
                                                         (size_t)readbuf.len);
        if (size == -1)
            batch_fill(&b, i);
        else if (size < 0)
            b.status[i] = ST_PYTHON;
        else if (batch_place(&b, i, dctx, readbuf.buf, (size_t)size) == ST_OK) {
            files++; /* a chunk left to the Python path is read again there, and counted there */
            total += size;
        }
    }
    if (dctx != NULL) zstd.free(dctx);
    Py_END_ALLOW_THREADS

    PyObject *left = batch_left(&b);
    if (left != NULL) result = Py_BuildValue("nnN", files, total, left);

done:
    if (encoded != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(encoded[i]);
        PyMem_Free(encoded);
    }
    if (have_read) PyBuffer_Release(&readbuf);
    batch_free(&b);
    return result;
}

PyDoc_STRVAR(decode_chunks_doc,
"decode_chunks(sources, projections, out, chunk_shape, codec, fill, chunkbuf)\n"
"--\n\n"
"Decode and place a batch of chunks whose bytes are already in memory (the inner chunks of a shard),\n"
"with the GIL released. ``sources[i]`` holds the stored bytes of ``projections[i]`` (None: missing, so\n"
"filled); the other arguments are as for ``read_chunks``. Returns the list of indices left for the Python\n"
"path (a decode it cannot do exactly).");

static PyObject *native_decode_chunks(PyObject *self, PyObject *args) {
    PyObject *sources, *projections, *out_obj, *shape_obj, *fill_obj, *chunkbuf_obj;
    int codec;
    if (!PyArg_ParseTuple(args, "O!O!OOiOO", &PyList_Type, &sources, &PyList_Type, &projections, &out_obj,
                          &shape_obj, &codec, &fill_obj, &chunkbuf_obj))
        return NULL;
    const Py_ssize_t n = PyList_GET_SIZE(sources);
    PyObject *result = NULL;
    Py_buffer *views = NULL;
    Py_ssize_t held = 0;
    Batch b;
    if (batch_init(&b, n, projections, out_obj, shape_obj, codec, fill_obj, chunkbuf_obj) < 0) goto done;
    views = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < n; held++) {
        PyObject *src = PyList_GET_ITEM(sources, held);
        if (src != Py_None && PyObject_GetBuffer(src, &views[held], PyBUF_SIMPLE) < 0) goto done;
    }

    Py_BEGIN_ALLOW_THREADS
    void *dctx = codec == CODEC_ZSTD ? zstd.create() : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (views[i].obj == NULL)
            batch_fill(&b, i);
        else
            batch_place(&b, i, dctx, views[i].buf, (size_t)views[i].len);
    }
    if (dctx != NULL) zstd.free(dctx);
    Py_END_ALLOW_THREADS

    result = batch_left(&b);

done:
    if (views != NULL) {
        for (Py_ssize_t i = 0; i < held; i++)
            if (views[i].obj != NULL) PyBuffer_Release(&views[i]);
        PyMem_Free(views);
    }
    batch_free(&b);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", native_bind, METH_VARARGS,
     "bind(codec, library_path) -> bool: take codec's decoder from a loaded numcodecs extension module."},
    {"read_chunks", native_read_chunks, METH_VARARGS, read_chunks_doc},
    {"decode_chunks", native_decode_chunks, METH_VARARGS, decode_chunks_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "zarr_dask._native",
    "Batched local chunk reads with the GIL released (see zarr_dask/native.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
