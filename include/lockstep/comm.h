/* Lockstep: a communicator across processes (ranks) and collectives on
 * tensors, with results that do not depend on the number of ranks.
 *
 * One rank per device: the processes are started by MPI (mpirun), and a
 * communicator spans them.  Each rank attaches the device its tensors
 * live on; a collective then moves host-memory tensors with MPI and GPU
 * tensors with NCCL where every rank is a GPU and the library was built
 * with NCCL (through host memory otherwise).  docs/numerics.md section 14
 * is the contract: every collective gives the same bits on every rank,
 * for any number of ranks, and the float ones equal the one-device op.
 *
 * Collectives are blocking calls that every rank of the communicator makes
 * in the same order with agreeing arguments.  The arguments are checked
 * on every rank before any data moves: when one rank's call is bad (a
 * wrong shape, a NULL tensor), every rank's call fails with the same
 * status and a message naming that rank, and nothing is written.  A rank
 * that dies ends the job (MPI's runtime ends the others) rather than
 * leaving them waiting.
 *
 * Built without MPI (configure --with-mpi), lk_comm_create_mpi fails with
 * LK_ERR_UNSUPPORTED and a message that says so; the symbols exist in
 * every build. */
#ifndef LOCKSTEP_COMM_H
#define LOCKSTEP_COMM_H

#include <stdint.h>

#include <lockstep/device.h>
#include <lockstep/export.h>
#include <lockstep/status.h>
#include <lockstep/types.h>

LK_BEGIN_DECLS

typedef struct lk_comm lk_comm;

/* The ranks of an MPI communicator: mpi_comm points to an MPI_Comm (it is
 * duplicated; the caller keeps its own), or is NULL for MPI_COMM_WORLD.
 * MPI is initialised here (MPI_THREAD_FUNNELED) unless the caller did it,
 * and then finalised by the last lk_comm_destroy.  Collective. */
LK_API lk_status lk_comm_create_mpi(const void *mpi_comm, lk_comm **comm);
/* Collective; NULL is ignored. */
LK_API void lk_comm_destroy(lk_comm *comm);
LK_API int lk_comm_rank(const lk_comm *comm);
LK_API int lk_comm_size(const lk_comm *comm);
/* This rank's index among the ranks of its host (for choosing a GPU). */
LK_API int lk_comm_local_rank(const lk_comm *comm);

/* The device this rank's tensors live on (collective).  Chooses the
 * transport: "nccl" when every rank attached a CUDA device and NCCL is
 * available, else "mpi" (GPU tensors staged through host memory). */
LK_API lk_status lk_comm_attach(lk_comm *comm, lk_device *dev);
/* A queue on the attached device that collectives need not wait for: on
 * a GPU with the NCCL transport it runs on NCCL's stream, so a collective
 * is enqueued behind the queue's ops (and can be captured in a graph);
 * with other queues every collective synchronises the queue first.
 * num_threads as lk_queue_opts. */
LK_API lk_status lk_comm_queue_create(lk_comm *comm, int num_threads, lk_queue **q);
/* "mpi", "nccl", or "none" before lk_comm_attach. */
LK_API const char *lk_comm_transport(const lk_comm *comm);
/* Ends every rank's process with this exit code (MPI_Abort), for a caller
 * that cannot go on and whose peers may be waiting in a collective. */
LK_API void lk_comm_abort(lk_comm *comm, int code);

/* Every collective takes the queue of the attached device, or the queue
 * of any host-memory device for tensors in host memory. */

/* y = x_0 | x_1 | ... | x_{size-1}: the ranks' x side by side in rank
 * order (rank r's block starts at the column after the blocks of ranks
 * before it).  Every x has y's rows and dtype; widths may differ (0
 * included).  x may be exactly this rank's block of y (in place).  Any
 * dtype but LK_T2. */
LK_API lk_status lk_comm_all_gather(lk_comm *comm, lk_queue *q, const lk_tensor *x,
                                    const lk_tensor *y);
/* x takes root's bits on every rank. */
LK_API lk_status lk_comm_broadcast(lk_comm *comm, lk_queue *q, const lk_tensor *x, int root);
/* Point to point, blocking: the receiver's x has the sender's shape and
 * dtype (checked: a mismatch fails both calls). */
LK_API lk_status lk_comm_send(lk_comm *comm, lk_queue *q, const lk_tensor *x, int peer);
LK_API lk_status lk_comm_recv(lk_comm *comm, lk_queue *q, const lk_tensor *x, int peer);

typedef enum lk_comm_op {
    LK_COMM_SUM = 0, /* LK_I32, LK_I64: exact (LK_ERR_RANGE on overflow) */
    LK_COMM_MAX = 1  /* LK_F32 (IEEE maximum: NaN wins, -0 < +0), LK_I32, LK_I64 */
} lk_comm_op;
/* Element-wise over the ranks: y = op(x_0, ..., x_{size-1}), exact in any
 * order, so the same bits for every rank count.  y may be x. */
LK_API lk_status lk_comm_all_reduce(lk_comm *comm, lk_queue *q, lk_comm_op op,
                                    const lk_tensor *x, const lk_tensor *y);
/* Float row sums over ranks: the row of each of x's rows is the
 * concatenation of the ranks' rows (as lk_comm_all_gather); y (rows x 1,
 * f32) is its lane sum (docs/numerics.md section 5): the bits lk_reduce
 * LK_REDUCE_SUM gives on the whole row, whatever the rank count.  x f32. */
LK_API lk_status lk_comm_sum(lk_comm *comm, lk_queue *q, const lk_tensor *x, const lk_tensor *y);
/* The argmax of each concatenated row (as lk_comm_sum), int64 indices into
 * the whole row in y (rows x 1): lk_reduce LK_REDUCE_ARGMAX's result on
 * the whole row (the first of the largest in NaN > +Inf > ... > -0 > ...
 * > -Inf).  x f32. */
LK_API lk_status lk_comm_argmax(lk_comm *comm, lk_queue *q, const lk_tensor *x,
                                const lk_tensor *y);

LK_END_DECLS

#endif
