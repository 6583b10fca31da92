"""What is here: the host, the NVIDIA driver and each GPU, read once into plain records."""
