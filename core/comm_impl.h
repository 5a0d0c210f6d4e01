/* Lockstep core: the communicator's object and its NCCL transport
 * (internal; core/comm.c, core/comm_nccl.c). */
#ifndef LK_CORE_COMM_IMPL_H
#define LK_CORE_COMM_IMPL_H

#include <stddef.h>

#include <lockstep.h>
#include <lockstep/comm.h>

struct lk_comm {
    int rank, size, local_rank;
    void *mpi;          /* MPI_Comm *, a duplicate of the caller's */
    lk_device *dev;     /* lk_comm_attach's */
    void *nccl;         /* the NCCL transport's state, or NULL */
    void *stage[2];     /* host staging buffers */
    size_t stage_cap[2];
};

#include <stdint.h>

/* What each rank says about its call before any data moves. */
typedef struct lk_hdr {
    int32_t st;    /* lk_status of the local checks */
    int32_t dtype;
    int64_t rows, cols;   /* x */
    int64_t yrows, ycols; /* y (all-gather, reductions), or -1 */
    int64_t aux;          /* root, peer or op */
    char msg[208];
} lk_hdr;


#ifdef LK_HAVE_NCCL
/* The stream the NCCL transport runs on (a cudaStream_t), or NULL. */
void *lk_comm_nccl_stream(lk_comm *c);
/* 1 when dev is a CUDA device and the NCCL module loads. */
int lk_comm_nccl_possible(lk_device *dev);
/* Collective: the NCCL communicator over c's ranks (its id broadcast over
 * MPI).  Every rank calls it or none. */
lk_status lk_comm_nccl_create(lk_comm *c);
void lk_comm_nccl_destroy(lk_comm *c);
/* The data movement of the collectives, after the agreement (comm.c):
 * all-gather with the ranks' widths in all[r].cols and this rank's first
 * column off. */
lk_status lk_comm_nccl_all_gather(lk_comm *c, lk_queue *q, const lk_tensor *x,
                                  const lk_tensor *y, const lk_hdr *all, int64_t off);
lk_status lk_comm_nccl_broadcast(lk_comm *c, lk_queue *q, const lk_tensor *x, int root);
lk_status lk_comm_nccl_p2p(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer, int sending);
#else
static inline void *lk_comm_nccl_stream(lk_comm *c)
{
    (void)c;
    return NULL;
}
static inline int lk_comm_nccl_possible(lk_device *dev)
{
    (void)dev;
    return 0;
}
static inline lk_status lk_comm_nccl_create(lk_comm *c)
{
    (void)c;
    return LK_ERR_UNSUPPORTED;
}
static inline void lk_comm_nccl_destroy(lk_comm *c)
{
    (void)c;
}
static inline lk_status lk_comm_nccl_all_gather(lk_comm *c, lk_queue *q, const lk_tensor *x,
                                                const lk_tensor *y, const lk_hdr *all,
                                                int64_t off)
{
    (void)c, (void)q, (void)x, (void)y, (void)all, (void)off;
    return LK_ERR_UNSUPPORTED;
}
static inline lk_status lk_comm_nccl_broadcast(lk_comm *c, lk_queue *q, const lk_tensor *x,
                                               int root)
{
    (void)c, (void)q, (void)x, (void)root;
    return LK_ERR_UNSUPPORTED;
}
static inline lk_status lk_comm_nccl_p2p(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer,
                                         int sending)
{
    (void)c, (void)q, (void)x, (void)peer, (void)sending;
    return LK_ERR_UNSUPPORTED;
}
#endif

#endif
