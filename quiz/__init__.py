"""The course quiz and its certificates, free of Streamlit.

`quiz.service` is the face the pages and the CLI use; the other modules hold one concern each:
the question bank (`bank`), the draw (`draw`), grading (`grading`), the attempt store
(`attempts`), names (`names`), certificate IDs (`ids`), signatures (`signing`), the
certificate store (`certificates`), the certificate's drawing (`layout`, `pdf`, `preview`).
"""
