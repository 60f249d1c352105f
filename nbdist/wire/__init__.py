"""The wire: how nbdist processes talk (layers L0-L2).

    protocol.py        the message kinds and the handshake's protocol version
    frames.py          message lists as length-prefixed pickles, large buffers out of band
    serialization.py   values, arguments and errors to bytes (cloudpickle, pickle 5 buffers)
    transport.py       authenticated framed connections (Unix sockets on a node, TCP across):
                       addresses, the handshake, TLS, `Connection` (a client endpoint)
    server.py          `Server`: the daemons' single-threaded loop serving many `Peer`s
    poller.py          fd readiness for that loop
    links.py           direct links: a framed socket between two processes of one node
"""
