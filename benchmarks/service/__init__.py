"""The services under load, driven from this process against real servers on loopback, bounded
in count and time: ``serve``'s latency and throughput, and both servers under hostile
requests."""
