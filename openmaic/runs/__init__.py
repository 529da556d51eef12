"""Classic generation runs: a fixed pipeline of steps on the durable runtime."""
