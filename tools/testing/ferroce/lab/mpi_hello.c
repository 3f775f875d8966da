// SPDX-License-Identifier: GPL-2.0
/*
 * mpi_hello: a small MPI job for the lab's check (tools/ferroce lab; lab/check): point to point
 * (rank 0 sends a 1 MiB message to each other rank, which sends it back; both ends compare it
 * byte for byte) and collectives (an allreduce of the ranks, a broadcast), then one line per
 * rank. With Open MPI over UCX (pml ucx), the messages cross ferroce0 (or rxe0).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (1 << 20)
#define ROUNDS 10

static unsigned char pattern(int round, int i)
{
	return (unsigned char)(i * 7 + round * 13);
}

int main(int argc, char **argv)
{
	int rank, size, len, bad = 0, sum = 0, value = 0;
	char host[MPI_MAX_PROCESSOR_NAME];
	unsigned char *buf = malloc(SIZE);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &len);
	if (!buf || size < 2) {
		fprintf(stderr, "mpi_hello: needs 2 ranks or more and %d bytes\n", SIZE);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (int round = 0; round < ROUNDS; round++) {
		for (int peer = 1; peer < size; peer++) {
			if (rank == 0) {
				for (int i = 0; i < SIZE; i++)
					buf[i] = pattern(round, i);
				MPI_Send(buf, SIZE, MPI_BYTE, peer, round, MPI_COMM_WORLD);
				memset(buf, 0, SIZE);
				MPI_Recv(buf, SIZE, MPI_BYTE, peer, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (rank == peer) {
				MPI_Recv(buf, SIZE, MPI_BYTE, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, SIZE, MPI_BYTE, 0, round, MPI_COMM_WORLD);
			} else {
				continue;
			}
			for (int i = 0; i < SIZE; i++)
				bad += buf[i] != pattern(round, i);
		}
	}
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		value = 4242;
	MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
	printf("rank %d of %d on %s: %d MiB sent back and forth, %d bytes wrong; allreduce %d (expected %d), broadcast %d\n",
	       rank, size, host, ROUNDS * (rank == 0 ? size - 1 : 1), bad, sum, size * (size - 1) / 2, value);
	free(buf);
	MPI_Finalize();
	return bad || sum != size * (size - 1) / 2 || value != 4242;
}
