"""Fault: batch inference where four threads call one shared model concurrently."""

from concurrent.futures import ThreadPoolExecutor

import torch
from _zoo import mlp, tensors, until_done

if __name__ == "__main__":
    model = mlp().eval()
    x = tensors(4096).tensors[0]
    requests = [x[i : i + 16] for i in range(0, len(x), 16)]

    def serve(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(batch).argmax(1)

    finished = until_done(steps=1600)  # 400 rounds of 4 concurrent requests
    done = 0
    with ThreadPoolExecutor(max_workers=4) as pool:
        while not finished(done):
            futures = [pool.submit(serve, r) for r in requests[1:4]]
            serve(requests[0])
            done += 1 + len([f.result() for f in futures])
    print("requests:", done)
