"""Time and cost, as ratios against a baseline measured in the same run: ``rank()`` latency
and throughput, what a request and tracing add, a cold start, a source's deadline, the onnx
embedder's graphs, a sweep's alternative and the token budget."""
