"""Course content: the types a course is made of."""
