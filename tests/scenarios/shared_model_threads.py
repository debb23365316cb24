"""Fault: batch inference where four threads call one shared model concurrently.

Mild: three threads (two requests in the pool beside the main thread's). Fixed: one thread
serves the four requests of a round as one batch.
"""

from concurrent.futures import ThreadPoolExecutor

import torch
from _zoo import dose, fixed, mlp, tensors, until_done

THREADS = 1 if fixed() else dose(strong=4, mild=3)
PER_ROUND = 4 if fixed() else THREADS  # requests served in one round

if __name__ == "__main__":
    model = mlp().eval()
    x = tensors(4096).tensors[0]
    requests = [x[i : i + 16] for i in range(0, len(x), 16)]

    def serve(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(batch).argmax(1)

    finished = until_done(steps=400 * PER_ROUND)  # 400 rounds
    done = 0
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        while not finished(done):
            if fixed():
                serve(torch.cat(requests[0:PER_ROUND]))
                done += PER_ROUND
                continue
            futures = [pool.submit(serve, r) for r in requests[1:THREADS]]
            serve(requests[0])
            done += 1 + len([f.result() for f in futures])
    print("requests:", done)
