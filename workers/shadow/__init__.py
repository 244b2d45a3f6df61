"""Shadow evaluation: candidate traces paired with production by request id, compared with paired statistics."""
