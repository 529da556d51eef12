-- What reading a material found, kept beside it so the owner's list (GET /api/materials) shows it without reading
-- every material's text again: the characters read, the first words (at most 240 characters, whitespace folded,
-- cut at a word) and, for a PDF, the pages read. Materials uploaded before this migration get their characters and
-- excerpt from their stored text; their pages were never stored and stay unknown (NULL).
ALTER TABLE materials
    ADD COLUMN characters integer NOT NULL DEFAULT 0 CHECK (characters >= 0),
    ADD COLUMN excerpt    text    NOT NULL DEFAULT '',
    ADD COLUMN pages      integer CHECK (pages >= 0);

-- The excerpt as openmaic.materials.excerpt_of makes it (the first 4000 characters are plenty for 240 of them).
WITH flat AS (SELECT id, btrim(regexp_replace(left(text, 4000), '\s+', ' ', 'g')) AS f FROM materials)
UPDATE materials m
   SET characters = char_length(m.text),
       excerpt = CASE WHEN char_length(flat.f) <= 240 THEN flat.f
                      ELSE regexp_replace(left(flat.f, 240), ' [^ ]*$', '') || '…' END
  FROM flat
 WHERE flat.id = m.id;
