"""gRPC plumbing shared by every service and client: server factory, errors, deadlines."""
