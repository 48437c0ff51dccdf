"""The course, for instructors: grading a submission (:mod:`.grading`), a class folder and a
gradebook (:mod:`.classroom`), a notebook's exercises (:mod:`.notebook_grading`), the student
release (:mod:`.release`, :mod:`.leaks`), Gradescope's and PrairieLearn's autograders
(:mod:`.autograders`) and similarity between submissions (:mod:`.similarity`). A student meets it
through :func:`pmpp.exercises.grade` and ``pmpp grade``."""
