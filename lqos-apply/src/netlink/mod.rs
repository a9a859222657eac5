//! rtnetlink backend: message encoding (pure), the socket, and readback.
