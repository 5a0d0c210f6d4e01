/* Lockstep quickstart: RMSNorm of a 2 x 5 matrix on the device "auto" picks.
 * Build: cc quickstart.c $(pkg-config --cflags --libs lockstep) */
#include <stdio.h>
#include <lockstep.h>

int main(void)
{
    float x[2][5] = {{1, 2, 3, 4, 5}, {-1, 0.5f, 0, 8, -2}}, y[2][5];
    lk_context *ctx; lk_device *dev; lk_queue *q; void *dx, *dy;
    if (lk_context_create(&ctx) || lk_device_find(ctx, "auto", &dev) ||
        lk_queue_create(dev, NULL, &q) || lk_malloc(dev, sizeof x, &dx) ||
        lk_malloc(dev, sizeof y, &dy)) /* device memory: this runs on GPUs too */
        return fprintf(stderr, "lockstep: %s\n", lk_last_error()), 1;
    lk_tensor tx = lk_mat(dx, LK_F32, 2, 5), ty = lk_mat(dy, LK_F32, 2, 5);
    if (lk_memcpy(q, dx, x, sizeof x, LK_COPY_HOST_TO_DEVICE) ||
        lk_rmsnorm(q, &tx, NULL, 1e-6f, &ty) ||
        lk_memcpy(q, y, dy, sizeof y, LK_COPY_DEVICE_TO_HOST) || lk_queue_sync(q))
        return fprintf(stderr, "lockstep: %s\n", lk_last_error()), 1;
    printf("rmsnorm on %s (the same bits on every device):\n", lk_device_name(dev));
    for (int i = 0; i < 2; i++, printf("\n"))
        for (int j = 0; j < 5; j++) printf(" %.9g", y[i][j]);
    lk_free(dev, dx), lk_free(dev, dy), lk_queue_destroy(q), lk_context_destroy(ctx);
    return 0;
}
